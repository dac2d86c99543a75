/*
 * chorus-tune: measures the cost model's parameters on this machine, thoroughly (about a second per
 * link), and writes a tuning file for CHORUS_TUNING_FILE. Run it under chorusrun with two ranks or more:
 *
 *     chorusrun -n 2 chorus-tune -o chorus-tuning.txt
 *
 * On one host it measures shared memory (and the host arena) with a first communicator, then TCP with a
 * second one (CHORUS_TRANSPORT=tcp); across hosts, TCP between rank 0 and the first rank on another host.
 * Rank 0 writes the file. docs/tuning.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chorus/chorus.h"
#include "core/comm_info.h"
#include "tune/tune.h"

static int fail(chorus_comm_t comm, const char *what, chorus_result_t res)
{
    fprintf(stderr, "chorus-tune: %s: %s: %s\n", what, chorus_result_name(res),
            comm ? chorus_comm_last_error(comm) : chorus_strerror(res));
    return 1;
}

int main(int argc, char **argv)
{
    const char *out = "chorus-tuning.txt";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "usage: chorusrun -n N chorus-tune [-o FILE]   (default FILE: %s)\n", out);
            return strcmp(argv[i], "-h") == 0 ? 0 : 2;
        }
    }
    chorus_comm_t comm, tcp_comm;
    chorus_result_t res = chorus_comm_init_from_env(&comm);
    if (res != CHORUS_SUCCESS) return fail(NULL, "chorus_comm_init_from_env (run under chorusrun)", res);
    int rank, nranks;
    chorus_comm_rank(comm, &rank);
    chorus_comm_size(comm, &nranks);
    if (nranks < 2) {
        fprintf(stderr, "chorus-tune: needs two ranks or more (chorusrun -n 2 chorus-tune)\n");
        chorus_comm_destroy(comm);
        return 2;
    }
    tune_params_t tp, tcp;
    tune_link_t link, tcp_link;
    if ((res = comm_tune_measure(comm, &tp, &link)) != CHORUS_SUCCESS) return fail(comm, "measuring", res);
    if (link == TUNE_LINK_SHM) {
        /* The TCP path of this host: a second communicator over loopback (or CHORUS_SOCKET_IFNAME), its
         * unique id sent through the first. */
        chorus_unique_id_t id;
        if (rank == 0 && (res = chorus_get_unique_id(&id)) != CHORUS_SUCCESS) return fail(NULL, "unique id", res);
        if ((res = chorus_broadcast(&id, &id, sizeof(id), chorus_uint8, 0, comm, NULL)) != CHORUS_SUCCESS)
            return fail(comm, "broadcast of the unique id", res);
        setenv("CHORUS_TRANSPORT", "tcp", 1);
        if ((res = chorus_comm_init_rank(&tcp_comm, nranks, id, rank)) != CHORUS_SUCCESS)
            return fail(NULL, "the TCP communicator", res);
        if ((res = comm_tune_measure(tcp_comm, &tcp, &tcp_link)) != CHORUS_SUCCESS)
            return fail(tcp_comm, "measuring TCP", res);
        chorus_comm_destroy(tcp_comm);
        tp.alpha[TUNE_LINK_TCP] = tcp.alpha[TUNE_LINK_TCP];
        memcpy(tp.beta[TUNE_LINK_TCP], tcp.beta[TUNE_LINK_TCP], sizeof(tp.beta[TUNE_LINK_TCP]));
        memcpy(tp.beta_oneway[TUNE_LINK_TCP], tcp.beta_oneway[TUNE_LINK_TCP], sizeof(tp.beta_oneway[TUNE_LINK_TCP]));
    }
    chorus_comm_destroy(comm);
    if (rank != 0) return 0;
    char err[512];
    if (tune_file_write(out, &tp, err, sizeof(err)) != CHORUS_SUCCESS) {
        fprintf(stderr, "chorus-tune: %s\n", err);
        return 1;
    }
    printf("chorus-tune: %d ranks; wrote %s:\n", nranks, out);
    FILE *f = fopen(out, "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        if (line[0] != '#') printf("  %s", line);
    if (f) fclose(f);
    return 0;
}
