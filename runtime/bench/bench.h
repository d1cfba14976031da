/* bench.h — the benchmark commands of tacorun (argv[0] is the command's name;
 * each returns the exit status). */
#ifndef BENCH_H
#define BENCH_H

int bench_codec_main(int argc, char **argv);     /* bench-codec: bench_codec.c */
int bench_codec_moe_main(int argc, char **argv); /* bench-codec --moe: bench_codec_moe.c */
int bench_comm_main(int argc, char **argv);      /* bench-comm: bench_comm.c */
int bench_decode_main(int argc, char **argv);    /* bench-decode: bench_decode.c */
int bench_decode_step_main(int argc, char **argv); /* bench-decode-step: bench_decode_step.c */
int bench_burst_main(int argc, char **argv);     /* bench-burst: bench_burst.c */
int cmd_probe_interleave(int argc, char **argv); /* probe-interleave: probe_interleave.c */

#endif
