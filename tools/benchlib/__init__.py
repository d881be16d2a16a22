"""benchlib, the package behind tools/bench: pib against Soft-RoCE in the same guests, and against
the host's own ceiling.

`make bench` (or `tools/bench` from anywhere) boots two guests once (tools/pibvm, run directory
<outputs>/vm-bench) and measures, in the same run and on the same two QEMU processes:

    pib        perftest over pib_0, port 1: the pib link, a unix stream socket between the QEMUs;
    rxe        perftest over Soft-RoCE (rdma_rxe) on a virtio-net NIC joined by a unix stream
               socket between the same two QEMUs (`pibvm up --data-net`), MTU 9000, so IB MTU
               4096 like pib;
    ceiling    what the host itself moves through a unix socket used as the pib link uses its
               own (tools/hostlimits.c `link`), one sample right after each pib bandwidth run of
               the same test and size, under the same host load as the figure it bounds;
    memcpy     the host's memcpy bandwidth, before the guests boot (for reference).

perftest runs server on node0, client on node1.  Latency is perftest's t_typical (the median),
bandwidth its "BW average" and the message rate its MsgRate column; every figure is the median
of --runs runs.  Then storage, the kernel's NVMe over Fabrics: nvme-rdma on pib, nvme-rdma on
Soft-RoCE and nvme-tcp on the management network, from node1 to a RAM namespace on node0, with
fio: 128 KiB sequential writes and reads (MB/s) and 4 KiB random reads at queue depth 16
(kIOPS).  The host's idle share (from /proc/stat, idle + iowait of all CPUs) is recorded over
every run: TCG is all CPU, so a host with no idle time left is the limit, not the transport.
MB is 2^20 bytes, the unit perftest reports in; the host figures use the same unit.  A failed
run is logged in the scratch directory's logs/ and recorded as failed, with its reason; a
transport that keeps failing is given up for the rest of the run (measure.py).

The software stack (PIB_STACK, mk/stack.sh) picks QEMU, kernel and image: <outputs> is build/
for bookworm, build/trixie/ for trixie, and a results file of a stack other than bookworm is
named for it.  PIB_GUEST_LOCK=FILE: hold an flock on FILE while the guests are up (as
tests/run.sh), so that runs sharing a machine never boot guests at once; a lock on FILE
inherited from `flock FILE make bench` is used as it is.

Output:
    bench/results/<date>-<host>[-<stack>].csv   every run of every figure, one row each
                   (test,size,transport,run,value,unit,host_idle,status,note; status ok, failed
                   or skipped, note the reason), after "# key: value" lines that describe the
                   machine, the stack and the settings.  The file to commit.
    bench/results/<date>-<host>[-<stack>].md    made from the CSV alone: the machine, the goals,
                   the medians with every run, the ceiling, failed measurements and why.
    <outputs>/bench/  scratch: bandwidth.png (MB/s against message size: pib, rxe, ceiling),
                   logs/ (every perftest output, the guests' setup), the hostlimits binary.

    tools/bench --report FILE.csv        remake FILE.md and the chart from a results file
    tools/bench --readme-table FILE.csv  print the README's table and goals from a results file
    tools/bench --chart FILE.csv OUT.png the bandwidth chart of a results file

The guests are always shut down at the end, also on errors and Ctrl-C.

The package (tools/bench is its entry point: the command line and the guest lock):

    config.py     paths (PIB_STACK's outputs), transports, tests, sizes, units, the NVMe jobs;
                  say/die (tools/toolmsg.py), the errors of set-up and measurement
    host.py       the host's idle share, its ceiling for the link and memcpy (hostlimits.c),
                  its description
    guests.py     the two guests through pibvm; the data network, Soft-RoCE, pib, the NVMe target
    perftest.py   the plan of perftest runs, one run between the guests, reading its output
    measure.py    a whole run: boot, set up, measure (perftest, NVMe with fio), write the outputs
    results.py    Record, the results file (write, load, name), Figures (medians), the goals
    report.py     the report (.md) next to a results file, the README's table
    plot.py       the bandwidth chart
"""
