/* test_base.c -- the base layer every stage uses (runtime/rt_base): a
 * message list that says when it cut a message, the monotonic clock, and
 * the names BATON_TRACE gives its files. */
#include <stdlib.h>
#include <string.h>

#include "rt_diag.h"
#include "rt_param.h"
#include "rt_time.h"
#include "tap.h"

int main(void) {
  setenv("BATON_TRACE", "/tmp/call.%n.x%n", 1);   /* before any parameter is read */
  char path[64];
  ok(rt_param_trace_file(path, sizeof path, 2, 1, ".csv") == 0 && !strcmp(path, "/tmp/call.2.x2.1.csv"),
     "BATON_TRACE's %%n is the communicator's ranks, then .RANK and the suffix: %s", path);
  ok(rt_param_trace_file(path, sizeof path, 16, 3, ".net.csv") == 0 && !strcmp(path, "/tmp/call.16.x16.3.net.csv"),
     "the network proxy's file alike: %s", path);
  ok(rt_param_trace_file(path, 20, 2, 1, ".csv") == -1 && path[0] == 0 &&
     rt_param_trace_file(path, 17, 2, 1, ".csv") == -1,
     "a name that does not fit is refused, not cut");
  rt_diag *d = rt_diag_new(4);
  char *word = malloc(20001);
  for (int i = 0; i < 20000; i++) word[i] = i % 6 == 5 ? ' ' : 'a' + i % 6;
  word[20000] = 0;
  rt_diag_add(d, "long: %s", word);
  const char *t = rt_diag_text(d);
  size_t n = strlen(t);
  const char *note = strstr(t, "... (");
  ok(n < 16400 && note && strstr(note, " more characters)\n") == t + n - strlen(" more characters)\n"),
     "a message over 16 KiB is cut with how much was left out (%zu bytes kept)", n);
  size_t at = note ? (size_t)(note - t) : 0;   /* where the note starts: a space of the message, cut before it */
  ok(note && at > strlen("long: ") && word[at - strlen("long: ")] == ' ' && note[-1] != ' ',
     "and it ends at a word, not in one");
  int more = note ? atoi(note + 5) : -1;
  ok(more > 0 && (size_t)(note - t) + (size_t)more == strlen("long: ") + 20000,
     "the count of what was left out adds up to the message (%d)", more);
  rt_diag_clear(d);
  rt_diag_add(d, "short: %s", "whole");
  ok(!strcmp(rt_diag_text(d), "short: whole\n"), "a short message stays whole: %s", rt_diag_text(d));
  char buf[100];
  const char *src = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                    "sixteen seventeen eighteen nineteen twenty";
  int full = (int)strlen(src);
  memcpy(buf, src, sizeof buf - 1);   /* what vsnprintf leaves of it */
  buf[sizeof buf - 1] = 0;
  int len = rt_cut_note(buf, sizeof buf, full);
  ok(len == (int)strlen(buf) && len < (int)sizeof buf && strstr(buf, "... (") && buf[strstr(buf, "... (") - buf - 1] != ' ',
     "rt_cut_note on a small buffer: %s", buf);
  int64_t a = rt_time_ns(), b = rt_time_ns();
  double s = rt_time_s();
  ok(a > 0 && b >= a && s > 0 && (int64_t)(s * 1e9) >= b - 1000000, "the clock runs forward, the same in ns and s");
  rt_diag_free(d);
  free(word);
  return tap_done();
}
