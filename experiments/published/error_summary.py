"""The summary lines under a published set's table (run.sh of dense-infer and inflight-infer): for each source
and GPU, and for all rows, the row count, median and max |error| and the signed range. errs: {"source gpu": [error,
...]}, error = predicted / published - 1."""
import statistics


def print_summary(errs):
    print()
    print("%-15s %5s %14s %14s %18s" % ("source gpu", "rows", "median |err|", "max |err|", "signed range"))
    every = []
    for src in errs:
        every += errs[src]
        line(src, errs[src])
    line("all", every)


def line(label, e):
    a = [abs(x) for x in e]
    print("%-15s %5d %13.1f%% %13.1f%% %8.1f..%+.1f%%" % (label, len(a), 100 * statistics.median(a), 100 * max(a),
          100 * min(e), 100 * max(e)))
