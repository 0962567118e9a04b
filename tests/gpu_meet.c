/* gpu_meet.c -- LL calls around a call in which two ranks do not meet, on
 * real GPUs, every rank in one process.
 *
 * LL landings alternate between two halves of the window call by call.
 * A call in which rank p puts to rank q ends only once q has begun it, so
 * p is never two calls ahead of q where every call pairs them.  A
 * Broadcast from a third rank does not: p and q each meet only the root.
 * Here rank 2's stream is held for a while before an LL program in which
 * rank 0 puts to rank 1 and rank 1 waits for rank 2; then every rank runs
 * a direct LL Broadcast from the last rank, then the first program again.
 * Rank 0 finishes the first two calls at once, and its third call's put
 * reaches the half rank 1 is still reading in the first.  Before a call
 * in which ranks do not see each other begin ended only once they had,
 * rank 1 waited there for a flag that never came and the call timed out.
 * A fourth call, a Broadcast from rank 0, follows the program in which
 * the last rank has no thread block (it says it has begun, and waits for
 * the others, from a block that only counts the call).  The outputs of all four calls are
 * checked, each call with other values.
 *
 * Usage: gpu_meet --ranks N --dir DIR [--gpus G]
 *   N >= 4; DIR/default (else DIR) holds the default set for N ranks
 *   (tests/gpu_runtime.sh prepares it); the test runs on a subfolder of
 *   DIR holding its program and the set's direct LL Broadcasts.  Rank r runs on GPU r % G (G defaults to N). */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "gpu_opts.h"
#include "ir_read.h"
#include "tap.h"

#define COUNT 16384      /* f32 elements of each call (64 KiB: the LL Broadcast's range) */
#define HOLD_S 2.0       /* how long rank 2's stream is held */
#define TIMEOUT_S "10"   /* BATON_TIMEOUT: above HOLD_S, so only a wait that never ends gives up */
#define CALLS 4          /* the program, a Broadcast from the last rank, the program, a Broadcast from rank 0 */

static int nranks, ngpus;

/* The program of the first and third calls: rank 0 puts its input into
 * rank 1's landing and ends waiting for rank 1's signal; rank 1 signals
 * rank 0, waits for rank 2's signal, then copies its landing into its
 * output; rank 2 signals rank 1; the other ranks do nothing. */
static int write_program(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "<algo name=\"meet_pq\" proto=\"baton-LL\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"%d\" "
             "coll=\"custom\" inplace=\"0\" baton=\"1\" expect=\"o[r][c]=i[0][c] if r==1\">\n", nranks);
  const char *step = "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"1\" "
                     "depid=\"-1\" deps=\"-1\" hasdep=\"0\"%s />\n";
  for (int r = 0; r < nranks; r++) {
    fprintf(f, "  <gpu id=\"%d\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"%d\">\n", r, r == 1);
    if (r <= 2) fprintf(f, "    <tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">\n");
    if (r == 0) {
      fprintf(f, step, 0, "put", "i", 0, "s", 0, " peer=\"1\"");
      fprintf(f, step, 1, "wait", "i", -1, "o", -1, " peer=\"1\"");
    } else if (r == 1) {
      fprintf(f, step, 0, "sig", "i", -1, "o", -1, " peer=\"0\"");
      fprintf(f, step, 1, "wait", "i", -1, "o", -1, " peer=\"2\"");
      fprintf(f, step, 2, "cpy", "s", 0, "o", 0, "");
    } else if (r == 2) {
      fprintf(f, step, 0, "sig", "i", -1, "o", -1, " peer=\"1\"");
    }
    if (r <= 2) fprintf(f, "    </tb>\n");
    fprintf(f, "  </gpu>\n");
  }
  fprintf(f, "</algo>\n");
  return fclose(f);
}

/* The names of the Broadcasts fill_dir linked (their algo's name). */
#define MAX_NAMES 16
static char names[MAX_NAMES][128];
static int nnames;

/* Notes the algo name of the IR file at path (the library's reader). */
static void note_name(const char *path) {
  ir_prog *p = NULL;
  if (nnames < MAX_NAMES && !ir_read_file(path, &p, NULL) && p->name)
    snprintf(names[nnames++], sizeof names[0], "%s", p->name);
  ir_prog_free(p);
}

/* Whether `name` is one of the linked Broadcasts'. */
static int linked(const char *name) {
  for (int i = 0; i < nnames; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

/* Fills `to` (made here) with the program and a link to each direct LL
 * Broadcast of `from`; the count of Broadcasts, or -1. */
static int fill_dir(const char *from, const char *to) {
  char path[8192], src[8192];
  if (mkdir(to, 0755) && access(to, W_OK)) return -1;
  snprintf(path, sizeof path, "%s/meet_pq.xml", to);
  if (write_program(path)) return -1;
  DIR *d = opendir(from);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "broadcast", 9) || !strstr(e->d_name, "direct_ll") || !strstr(e->d_name, ".xml")) continue;
    snprintf(src, sizeof src, "%s/%s", from, e->d_name);
    snprintf(path, sizeof path, "%s/%s", to, e->d_name);
    remove(path);
    if (symlink(src, path) == 0) {
      note_name(src);
      n++;
    }
  }
  closedir(d);
  return n;
}

static void CUDART_CB hold(void *u) {
  (void)u;
  struct timespec t = {(time_t)HOLD_S, (long)((HOLD_S - (time_t)HOLD_S) * 1e9)};
  nanosleep(&t, NULL);
}

/* The root of call k, a Broadcast. */
static int root_of(int k) { return k == 1 ? nranks - 1 : 0; }

/* Rank r's input for call k: distinct for every rank and call. */
static float value(int k, int r, int i) { return (float)(k * 100000 + r * 20000 + i % 9973); }

int main(int argc, char **argv) {
  gpu_opts o;
  if (gpu_opts_read(argc, argv, "gpu_meet", GPU_OPT_GPUS, 4, 16, &o)) return 2;
  nranks = o.nranks;
  ngpus = o.ngpus;
  char dir[4096], set[4096];
  snprintf(dir, sizeof dir, "%s/meet", o.dir);
  snprintf(set, sizeof set, "%s/default", o.dir);
  /* Before anything of the library runs (fill_dir reads IR files): it
   * reads its parameters once. */
  setenv("BATON_ALGO_DIR", dir, 1);
  setenv("BATON_TIMEOUT", TIMEOUT_S, 1);
  int nb = fill_dir(access(set, R_OK) == 0 ? set : o.dir, dir);
  ok(nb > 0, "a folder with the program and the library's direct LL Broadcasts (%d of them)", nb);
  if (nb <= 0) return tap_done();
  baton_comm **comms = calloc(nranks, sizeof *comms);
  cudaStream_t *streams = calloc(nranks, sizeof *streams);
  float **in = calloc(CALLS * nranks, sizeof *in), **out = calloc(CALLS * nranks, sizeof *out);
  int *devs = calloc(nranks, sizeof *devs);
  float *h = malloc(COUNT * sizeof *h);
  for (int r = 0; r < nranks; r++) devs[r] = r % ngpus;
  baton_result e = baton_comm_init_all(comms, nranks, devs);
  ok(e == baton_success, "communicators of %d ranks on %d GPUs: %s", nranks, ngpus, baton_result_string(e));
  if (e) return tap_done();
  int bad = 0;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(devs[r]);
    bad |= cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) != cudaSuccess;
    for (int k = 0; k < CALLS; k++) {
      bad |= cudaMalloc((void **)&in[CALLS * r + k], COUNT * sizeof(float)) != cudaSuccess;
      bad |= cudaMalloc((void **)&out[CALLS * r + k], COUNT * sizeof(float)) != cudaSuccess;
      for (int i = 0; i < COUNT; i++) h[i] = value(k, r, i);
      bad |= cudaMemcpy(in[CALLS * r + k], h, COUNT * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess;
      bad |= cudaMemset(out[CALLS * r + k], 0, COUNT * sizeof(float)) != cudaSuccess;
    }
    bad |= cudaDeviceSynchronize() != cudaSuccess;
  }
  ok(!bad, "buffers and streams");
  if (bad) return tap_done();
  cudaSetDevice(devs[2]);
  cudaLaunchHostFunc(streams[2], hold, NULL);
  char ran[CALLS][128] = {{0}};
  for (int k = 0; k < CALLS; k++) {
    baton_result ce = baton_success;
    baton_group_start();
    for (int r = 0; r < nranks; r++) {
      float *src = in[CALLS * r + k], *dst = out[CALLS * r + k];
      baton_result x = k % 2 ? baton_broadcast(src, dst, COUNT, baton_f32, root_of(k), comms[r], streams[r])
                             : baton_run("meet_pq", src, dst, COUNT, baton_f32, baton_sum, comms[r], streams[r]);
      if (x) ce = x;
    }
    baton_result ge = baton_group_end();
    const char *name = baton_comm_last_algorithm(comms[0]);
    snprintf(ran[k], sizeof ran[k], "%s", name ? name : "none");
    ok(!ce && !ge, "call %d (%s) submitted: %s, %s", k + 1, ran[k], baton_result_string(ce), baton_result_string(ge));
  }
  ok(linked(ran[1]) && linked(ran[3]), "the Broadcasts ran the set's direct LL programs (%s, %s)", ran[1], ran[3]);
  int stream_bad = 0, async_bad = 0;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(devs[r]);
    stream_bad += cudaStreamSynchronize(streams[r]) != cudaSuccess;
    baton_result ae = baton_success;
    baton_comm_get_async_error(comms[r], &ae);
    if (ae) printf("# rank %d: %s\n", r, baton_result_string(ae));
    async_bad += ae != baton_success;
  }
  ok(!stream_bad && !async_bad, "every rank's stream finished, no call failed (%d streams, %d communicators failed)",
     stream_bad, async_bad);
  /* The outputs: rank 1's of calls 1 and 3 is rank 0's input of that
   * call; every rank's of calls 2 and 4 is the root's input. */
  int64_t wrong[CALLS] = {0};
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(devs[r]);
    for (int k = 0; k < CALLS; k++) {
      if (k % 2 == 0 && r != 1) continue;
      if (cudaMemcpy(h, out[CALLS * r + k], COUNT * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        wrong[k] += COUNT;
        continue;
      }
      for (int i = 0; i < COUNT; i++) wrong[k] += h[i] != value(k, k % 2 ? root_of(k) : 0, i);
    }
  }
  ok(!wrong[0] && !wrong[2], "rank 1 has rank 0's input of each LL call, the third call's not the first's (%lld, %lld "
     "wrong)", (long long)wrong[0], (long long)wrong[2]);
  ok(!wrong[1] && !wrong[3], "every rank has the root's input after each Broadcast (from rank %d: %lld wrong; from "
     "rank 0: %lld)", nranks - 1, (long long)wrong[1], (long long)wrong[3]);
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(devs[r]);
    for (int k = 0; k < CALLS; k++) {
      cudaFree(in[CALLS * r + k]);
      cudaFree(out[CALLS * r + k]);
    }
    cudaStreamDestroy(streams[r]);
    baton_comm_destroy(comms[r]);
  }
  free(h);
  free(devs);
  free(in);
  free(out);
  free(streams);
  free(comms);
  return tap_done();
}
