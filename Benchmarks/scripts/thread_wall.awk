# Where one thread's wall time went, from `perf sched timehist -t TID -g --state` (ingest.sh WALL=1): each line is a
# run of the thread, ended by a switch out in the state and kernel call chain it shows; the next line's wait time is
# how long that switch out lasted, and its scheduling delay how long the thread then waited for a core. Prints
# microseconds per notification (-v count=N) by cause, and each cause's share of the time seen. SQLite's writer is a
# Dispatch serial queue: while work waits for it, it keeps its thread; once it runs dry it may resume on another one,
# and its time there is missing here (this thread then shows it as futex waits).
NR > 3 && $4 ~ /^[0-9.]+$/ {
    if (cause != "") {
        spent[cause] += $4
        spent["waiting for a core after waking up"] += $5
    }
    spent["running"] += $6
    if ($7 == "R" || $7 == "W") cause = "preempted: waiting for a core"
    else if ($0 ~ /fdatawait|file_write_and_wait/) cause = "the commit: writing the log's pages"
    else if ($0 ~ /sync_dirty_buffer/) cause = "the commit: writing the log file's inode"
    else if ($0 ~ /blkdev_issue_flush/) cause = "the commit: the disk's cache flush"
    else if ($7 == "D") cause = "other disk waits"
    else if ($0 ~ /nanosleep/) cause = "timed sleeps (a group waiting for its writers)"
    else if ($0 ~ /futex/) cause = "futex: idle, or waiting for a lock"
    else if ($0 ~ /schedule_hrtimeout|do_poll|do_sys_poll/) cause = "poll: waiting on a socket (PostgreSQL's answer)"
    else cause = "other sleeps (" $7 " " $8 ")"
}
END {
    for (name in spent) total += spent[name]
    if (total == 0) { print "    (no runs of the thread were recorded)"; exit }
    for (name in spent)
        if (spent[name] > 0)
            printf "    %6.0f us per notification %5.1f%%  %s\n", spent[name] * 1000 / count,
                100 * spent[name] / total, name | "sort -rn"
}
