# Sourced by the benchmark scripts that time the binary as a user runs it. Needs `bin` (the
# chainweaver binary) and `data` (a folder for outputs) set by the caller.
#
#   timed LABEL ARGS...
#
# runs `$bin -q ARGS...` under /usr/bin/time -v, keeps its standard output in
# `$data/LABEL.out`, and prints `LABEL wall_s peak_MiB` (process start to exit, peak resident
# memory). A failed command prints its standard error and stops the script.
timed() {
    label=$1
    shift
    /usr/bin/time -v "$bin" -q "$@" >"$data/$label.out" 2>"$data/time.txt" || {
        cat "$data/time.txt" >&2
        exit 1
    }
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$data/time.txt")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$data/time.txt")
    secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
    echo "$label $secs $((rss / 1024))"
}
