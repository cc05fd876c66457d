// knobs.h: the declaration of every COHORT_* knob, the only one.
//
// To add a knob: declare a KnobSpec here and list it in kAllKnobs. Read it
// with config_bool / config_int / config_float / config_string
// (common/config_registry.h). docs/config.md is generated from this list by
// `cohort-info --markdown`.
#pragma once

#include <cstdint>

namespace cohort {

enum class KnobType { kBool, kInt, kFloat, kString, kChoice };

// KnobSpec is one knob: its variable name, type, default and documentation.
// `choices` lists the values a kChoice knob accepts, separated by '|';
// `secret` knobs never print their value. `torch_names` lists, separated
// by '|', torch's variables for the same thing, read (in that order) when
// the COHORT_* one is unset, so that a torch job's environment carries
// over; a kChoice value from there is matched without regard to case
// (torch writes DETAIL, cohort detail).
struct KnobSpec {
  const char* name;
  KnobType type;
  const char* default_value;
  const char* doc;
  const char* choices = nullptr;
  bool secret = false;
  const char* torch_names = nullptr;
  // The values a kInt or kFloat knob accepts, both ends included; NaN and
  // infinities never. A value outside is an error naming the knob, the
  // value and this range, never "wait forever" or an overflow.
  double min_value = 0;
  double max_value = 0;
};

namespace knobs {

inline constexpr KnobSpec kLogLevel{"COHORT_LOG_LEVEL", KnobType::kChoice, "warning",
                                    "Least severe log level printed to stderr.",
                                    "trace|debug|info|warning|error|off"};

inline constexpr KnobSpec kDebug{
    "COHORT_DEBUG",
    KnobType::kChoice,
    "off",
    "Debugging aids, as torch's TORCH_DISTRIBUTED_DEBUG: off; info logs each group's creation and, "
    "once per collective and size class, the algorithm that runs (and lowers COHORT_LOG_LEVEL to "
    "info); detail also makes the ranks compare what they call before every collective and raise "
    "DesyncError listing each rank's call when they differ (one small exchange per collective: "
    "docs/debugging.md). Read when a group is made; give every rank the same.",
    "off|info|detail",
    false,
    "TORCH_DISTRIBUTED_DEBUG"};

inline constexpr KnobSpec kStoreToken{
    "COHORT_STORE_TOKEN",
    KnobType::kString,
    "",
    "Shared secret for TcpStore authentication (HMAC-SHA256 challenge) and for the process groups' "
    "data-plane hellos (each carries an HMAC of the group's nonce under it); empty disables both.",
    nullptr,
    true};

inline constexpr KnobSpec kJobId{
    "COHORT_JOB_ID",
    KnobType::kString,
    "",
    "Names the job a process belongs to; the ranks of a group compare it when they claim their "
    "seats, so a process of another job that reaches this job's store (two jobs on one "
    "MASTER_PORT) is refused naming both jobs. cohortrun and torchrun set TORCHELASTIC_RUN_ID, "
    "read when this is unset; empty or none: processes started by hand, compared as such.",
    nullptr,
    false,
    "TORCHELASTIC_RUN_ID"};

inline constexpr KnobSpec kStoreMaxKeyBytes{
    "COHORT_STORE_MAX_KEY_BYTES",
    KnobType::kInt,
    "65536",
    "Longest key the TcpStore server accepts; a longer one closes the connection.",
    nullptr,
    false,
    nullptr,
    1,
    1073741824};

inline constexpr KnobSpec kStoreMaxFrameBytes{
    "COHORT_STORE_MAX_FRAME_BYTES",
    KnobType::kInt,
    "268435456",
    "Largest TcpStore request (and so value) the server accepts; bounds the memory a client can "
    "make the server hold for one request.",
    nullptr,
    false,
    nullptr,
    1024,
    1099511627776};

inline constexpr KnobSpec kStoreMaxOutputBytes{
    "COHORT_STORE_MAX_OUTPUT_BYTES",
    KnobType::kInt,
    "1048576",
    "Unsent reply bytes after which the TcpStore server stops reading a client's requests until "
    "it reads its replies.",
    nullptr,
    false,
    nullptr,
    1024,
    1099511627776};

inline constexpr KnobSpec kStoreHandshakeTimeoutS{
    "COHORT_STORE_HANDSHAKE_TIMEOUT_S",
    KnobType::kFloat,
    "30",
    "Seconds a new TcpStore connection has to complete its hello (and authentication).",
    nullptr,
    false,
    nullptr,
    0.001,
    86400};

inline constexpr KnobSpec kConnectRetryMaxMs{
    "COHORT_CONNECT_RETRY_MAX_MS",
    KnobType::kInt,
    "1000",
    "Longest pause between two attempts to connect to a peer or store that is not up yet.",
    nullptr,
    false,
    nullptr,
    1,
    600000};

inline constexpr KnobSpec kStoreClientSpinUs{
    "COHORT_STORE_CLIENT_SPIN_US",
    KnobType::kInt,
    "50",
    "Microseconds a TcpStore client polls for a reply before sleeping; a sleeping thread takes "
    "25-50 us to wake, longer than a whole store round trip. 0 disables.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kStoreServerSpinUs{
    "COHORT_STORE_SERVER_SPIN_US",
    KnobType::kInt,
    "50",
    "Microseconds the TcpStore server keeps polling after its last request before it sleeps, so "
    "that a client's next request finds it awake. 0 disables.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kSocketIfname{
    "COHORT_SOCKET_IFNAME",
    KnobType::kString,
    "",
    "Network interface whose address process groups listen on and publish; empty: the interface "
    "of the route to the store's host (MASTER_ADDR), never loopback unless that host is.",
    nullptr,
    false,
    "GLOO_SOCKET_IFNAME"};

inline constexpr KnobSpec kTcpSpinUs{
    "COHORT_TCP_SPIN_US",
    KnobType::kInt,
    "100",
    "Microseconds a collective polls its sockets without sleeping before it waits in poll(2). "
    "0 disables.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kTcpBufferBytes{
    "COHORT_TCP_BUFFER_BYTES",
    KnobType::kInt,
    "0",
    "SO_SNDBUF and SO_RCVBUF of process-group connections; 0 leaves them to the kernel's "
    "autotuning. A small value (65536) evens out the many flows of an all_to_all across hosts "
    "that share a link with a deep queue (8-16 hosts: 0.39-0.91 of the link to 0.79-0.95), and "
    "caps one flow at that window a round trip (docs/performance.md, 'Several hosts').",
    nullptr,
    false,
    nullptr,
    0,
    2147483647};

inline constexpr KnobSpec kTcpConnect{
    "COHORT_TCP_CONNECT", KnobType::kChoice, "eager",
    "When process groups connect their ranks over TCP: eager (every pair on different hosts while "
    "joining) or lazy (a pair on its first message; fewer connections for sparse traffic). Ranks "
    "that share a host's memory never connect.",
    "eager|lazy"};

inline constexpr KnobSpec kFileStoreCompactBytes{
    "COHORT_FILESTORE_COMPACT_BYTES",
    KnobType::kInt,
    "1048576",
    "A FileStore's log is rewritten (to a new file, renamed over the old) once it is this long and "
    "four times what its live keys need.",
    nullptr,
    false,
    nullptr,
    0,
    1099511627776};

inline constexpr KnobSpec kAlgo{
    "COHORT_ALGO", KnobType::kString, "",
    "Overrides the algorithm table: 'collective=algorithm' for every size, "
    "'collective:LO-HI:algorithm' for LO <= bytes per rank < HI (K, M, G; no HI: no bound), "
    "'leaders.collective...' for the step between hosts of a hierarchical one; e.g. "
    "'all_gather:0-64K:bruck,all_gather:64K-:ring'. Names: ring, recursive_doubling, "
    "halving_doubling, bruck (all_gather), recursive_halving (reduce_scatter), binomial_tree, "
    "chain and scatter_all_gather (broadcast), halving_gather (reduce), pipelined_tree and knomial_tree (broadcast, "
    "reduce), direct, pairwise, dissemination, shm_direct (all "
    "ranks on one host), hierarchical (several hosts) and hierarchical_shares (all_reduce, the same "
    "ranks on every host). 'shm_direct.WAY' also forces its way within the host: stamp (all_reduce), "
    "posts, in_place (broadcast, all_gather) or slots (cohort-info --algorithms --hosts 1 lists them). "
    "An item that cannot run on a group is refused: that collective fails, naming the item and why."};

inline constexpr KnobSpec kCostTcpUs{
    "COHORT_COST_TCP_US",
    KnobType::kFloat,
    "0",
    "The algorithm table's price of one message between hosts, in microseconds (0: the default "
    "measured on loopback TCP, 20). With COHORT_LINK_GBITS (the link's rate) it tells the cost "
    "model what the network costs, so that it chooses between few steps and little data as the "
    "cluster's links do (cohort-info --algorithms prints the result). Give every rank the same.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kCostCrowdedMessageUs{
    "COHORT_COST_CROWDED_MESSAGE_US",
    KnobType::kFloat,
    "0",
    "What one message of many in flight costs a rank's CPU on a machine whose ranks outnumber its "
    "CPUs, in microseconds (0: the default measured here, 2.3). bench/calibrate_crowding.sh "
    "measures it and COHORT_COST_CROWDED_STEP_US on the machine at hand. Give every rank the same.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kCostCrowdedStepUs{
    "COHORT_COST_CROWDED_STEP_US",
    KnobType::kFloat,
    "0",
    "What one step that waits for a message costs each rank on a machine whose ranks outnumber its "
    "CPUs, in microseconds (0: the default measured here, 9.4); bench/calibrate_crowding.sh "
    "measures it. Give every rank the same.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kCostRanksPerCpu{
    "COHORT_COST_RANKS_PER_CPU",
    KnobType::kFloat,
    "0",
    "How many ranks the algorithm table takes each CPU to run, on the group's most crowded "
    "machine (0: as counted when the group connects, from each rank's machine and CPU "
    "affinity; 1: a CPU for every rank, as on a cluster). Above 1 every rank's work costs that "
    "many times as much, so the table prefers fewer messages (cohort-info --algorithms "
    "--ranks-per-cpu prints the result). Give every rank the same.",
    nullptr,
    false,
    nullptr,
    0,
    100000};

inline constexpr KnobSpec kDefaultTimeoutS{
    "COHORT_TIMEOUT_S",
    KnobType::kFloat,
    "1800",
    "Default timeout of process groups (torch's default_pg_timeout), used when init_process_group "
    "is given none.",
    nullptr,
    false,
    nullptr,
    0.001,
    31536000};

inline constexpr KnobSpec kMpiThread{
    "COHORT_MPI_THREAD", KnobType::kChoice, "caller",
    "Which thread makes the mpi backend's MPI calls: caller (a blocking collective that finds "
    "the group idle runs on the calling thread, the native backend's rule; async or queued ones "
    "on the group's worker; calls within a group never overlap) or worker (every call on the "
    "group's worker thread, as torch's ProcessGroupMPI). worker costs two thread wake-ups, "
    "~5 us, per blocking collective.",
    "worker|caller"};

inline constexpr KnobSpec kMpiWait{
    "COHORT_MPI_WAIT", KnobType::kChoice, "block",
    "How the mpi backend waits for a collective: block (MPI's blocking call, its fastest; one "
    "that outlives its timeout makes a watchdog end the job with MPI_Abort, since MPI cannot "
    "cancel it) or poll (MPI's non-blocking call polled against the deadline; on timeout the Work "
    "fails with TimeoutError and the group is marked broken).",
    "block|poll"};

inline constexpr KnobSpec kShm{
    "COHORT_SHM", KnobType::kChoice, "auto",
    "Whether ranks on one host talk through shared memory: auto (yes, decided from each rank's host "
    "identity) or off (TCP over loopback for every pair).",
    "auto|off"};

inline constexpr KnobSpec kShmRanksPerHost{
    "COHORT_SHM_RANKS_PER_HOST",
    KnobType::kInt,
    "0",
    "For tests on one machine: treat each run of N consecutive global ranks as one host, so that "
    "the mixed (shm and TCP) and hierarchical paths run. 0: decide from the host identity.",
    nullptr,
    false,
    nullptr,
    0,
    65536};

inline constexpr KnobSpec kShmRingBytes{
    "COHORT_SHM_RING_BYTES",
    KnobType::kInt,
    "1048576",
    "Bytes of the shared-memory ring that carries messages from one rank to another on its host "
    "(rounded up to a power of two). A host has one a direction of each pair of its ranks: past "
    "16 ranks each gets at most its share of 256 MiB (at least 16 KiB), so that the arena grows "
    "as little as it can with the square of the ranks. Where /dev/shm has no room for the arena, "
    "the rings halve (to 16 KiB), then the slots (to 64 KiB), until it takes at most half the room.",
    nullptr,
    false,
    nullptr,
    4096,
    1073741824};

inline constexpr KnobSpec kShmSlotBytes{
    "COHORT_SHM_SLOT_BYTES",
    KnobType::kInt,
    "524288",
    "Bytes of each of a rank's two shared-memory slots, through which the direct shared-memory "
    "algorithms move data in chunks of this size.",
    nullptr,
    false,
    nullptr,
    4096,
    1073741824};

inline constexpr KnobSpec kShmSingleCopyBytes{
    "COHORT_SHM_SINGLE_COPY_BYTES",
    KnobType::kInt,
    "-1",
    "From this many bytes per rank, broadcast, all_gather and all_to_all among ranks of one host read "
    "the others' buffers directly (process_vm_readv: one copy instead of two through shared memory), "
    "where the system allows it (broadcast and all_gather only where the host's ranks do not outnumber "
    "its cores). -1 (the default): "
    "from 32 KiB, if the kernel's copy runs at 0.4 of memcpy's speed or more, measured on every rank "
    "when the group starts (0.6 on an Intel Xeon VM, where reading in place won by up to 2x; on an "
    "AMD EPYC VM it copied at ~5 GB/s and lost at every size: docs/performance.md); 0 disables; a "
    "size forces it from that size (broadcast and all_gather up to 16 KiB per rank go through the "
    "posts whatever it says).",
    nullptr,
    false,
    nullptr,
    -1,
    1099511627776};

inline constexpr KnobSpec kBind{
    "COHORT_BIND", KnobType::kChoice, "auto",
    "How a rank binds itself to CPUs when it joins, from LOCAL_RANK and LOCAL_WORLD_SIZE (torchrun's "
    "and any launcher's that sets them): cores gives each local rank contiguous whole cores of the "
    "process's affinity, numa whole NUMA nodes, none nothing. auto (the default) binds only a rank whose "
    "affinity is still every CPU of the host (or cgroup), so a program or launcher that set its own "
    "affinity is left as it was: to cores of its own, or where the local ranks outnumber the cores "
    "to a core it shares with its neighbours (rank i of L on core i*C/L of C). Unbound, "
    "ranks that wake each other may share one CPU for a whole job (3-4x slower, "
    "docs/performance.md). cohortrun and cohort-bench --spawn bind their workers themselves "
    "(--bind) and pass none.",
    "auto|cores|numa|none"};

inline constexpr KnobSpec kShmSpinUs{
    "COHORT_SHM_SPIN_US",
    KnobType::kInt,
    "200",
    "Microseconds a rank waiting on shared memory spins (then yields) before it sleeps on a futex; "
    "with more local ranks than the CPUs they may run on it yields from the start.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kLinkGbits{
    "COHORT_LINK_GBITS",
    KnobType::kFloat,
    "0",
    "Each host's network link rate in Gbit/s, when known (0: unknown, nothing paced). With it, an "
    "all_to_all across hosts that sends 4 MiB a rank and up paces each TCP stream to its share of "
    "the link (SO_MAX_PACING_RATE: the rate over the host's ranks, split by the bytes each stream "
    "carries): unpaced, each stream crosses its sender's and its receiver's link and TCP shares "
    "neither evenly (4 hosts on 2 Gbit/s links: 0.82-0.88 of the link's speed, paced 0.92-0.94). "
    "Ranks of one host are told apart only with shared memory on (else their links are paced "
    "too), and a socket once paced keeps the kernel's own TCP pacing. Read when a group is made; "
    "give every rank the same.",
    nullptr,
    false,
    nullptr,
    0,
    1000000};

inline constexpr KnobSpec kLauncherStopTimeoutS{
    "COHORT_LAUNCHER_STOP_TIMEOUT_S",
    KnobType::kFloat,
    "30",
    "Seconds cohortrun waits for workers to exit after SIGTERM (when one failed, or it was told to "
    "stop) before it kills them with SIGKILL (torchrun's 30); --shutdown-timeout overrides it.",
    nullptr,
    false,
    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
    0,
    86400};

inline constexpr KnobSpec kTraceBufferEntries{
    "COHORT_TRACE_BUFFER_ENTRIES",
    KnobType::kInt,
    "2000",
    "Operations each process group keeps in its flight recorder (a ring, allocated when the group is "
    "made), for the dumps cohort-trace reads. 0 disables the recorder.",
    nullptr,
    false,
    "TORCH_FR_BUFFER_SIZE|TORCH_NCCL_TRACE_BUFFER_SIZE",
    0,
    10000000};

inline constexpr KnobSpec kTraceDir{
    "COHORT_TRACE_DIR", KnobType::kString, "",
    "Directory where each rank writes its flight-recorder dump (rank_<global rank>.json) when an "
    "operation fails with a timeout, NetworkError or DesyncError, and on SIGUSR1 (the handler is "
    "installed only when this is set). Empty: no dumps."};

inline constexpr KnobSpec kStallWarnS{
    "COHORT_STALL_WARN_S",
    KnobType::kFloat,
    "60",
    "Seconds a collective (or point-to-point operation) may be pending before a warning names it "
    "and the ranks that have not joined it; repeated at doubling intervals until it ends. 0 "
    "disables the stall inspector.",
    nullptr,
    false,
    nullptr,
    0,
    31536000};

inline constexpr KnobSpec kStragglerIntervalS{
    "COHORT_STRAGGLER_INTERVAL_S",
    KnobType::kFloat,
    "1",
    "Seconds between a rank's publishing of its time in recent collectives to the job's store, from "
    "which each group's rank 0 names who the others waited for (docs/stragglers.md; cohort-top, "
    "cohort_torch.stragglers). 0 disables the accounting.",
    nullptr,
    false,
    nullptr,
    0,
    3600};

inline constexpr KnobSpec kStragglerDir{
    "COHORT_STRAGGLER_DIR", KnobType::kString, "",
    "Directory where each group's rank 0 keeps its latest straggler summary (<group>.json, replaced "
    "atomically), for the launcher's line at the end of a job; cohortrun sets it for its workers. "
    "Empty: no file."};

inline constexpr KnobSpec kMetricsPort{
    "COHORT_METRICS_PORT",
    KnobType::kInt,
    "0",
    "Port of a Prometheus text endpoint (GET /metrics) serving this process's arrival statistics; "
    "a process with LOCAL_RANK set serves on this port plus its local rank. 0: no endpoint.",
    nullptr,
    false,
    nullptr,
    0,
    65535};

inline constexpr KnobSpec kMetricsAddr{
    "COHORT_METRICS_ADDR", KnobType::kString, "127.0.0.1",
    "Address the metrics endpoint (COHORT_METRICS_PORT) listens on: loopback unless another is named "
    "(0.0.0.0 for every interface)."};

inline constexpr KnobSpec kAsGloo{
    "COHORT_AS_GLOO", KnobType::kBool, "0",
    "Python only: every process group torch makes for the backend \"gloo\" is a cohort group, so a "
    "program or framework that asks for gloo on CPU runs on cohort unmodified. Read when the "
    "interpreter starts (sitecustomize.py on build/python, or cohort_torch.pth once installed) and "
    "when cohort_torch is imported; cohortrun --as-gloo sets it (docs/python.md)."};

inline constexpr const KnobSpec* kAllKnobs[] = {
    &kLogLevel,
    &kDebug,
    &kStoreToken,
    &kStoreMaxKeyBytes,
    &kStoreMaxFrameBytes,
    &kStoreMaxOutputBytes,
    &kStoreHandshakeTimeoutS,
    &kConnectRetryMaxMs,
    &kStoreClientSpinUs,
    &kStoreServerSpinUs,
    &kSocketIfname,
    &kJobId,
    &kTcpSpinUs,
    &kAlgo,
    &kCostTcpUs,
    &kCostCrowdedMessageUs,
    &kCostCrowdedStepUs,
    &kCostRanksPerCpu,
    &kDefaultTimeoutS,
    &kMpiThread,
    &kMpiWait,
    &kTcpBufferBytes,
    &kTcpConnect,
    &kFileStoreCompactBytes,
    &kShm,
    &kShmRanksPerHost,
    &kShmRingBytes,
    &kShmSlotBytes,
    &kShmSpinUs,
    &kBind,
    &kShmSingleCopyBytes,
    &kLinkGbits,
    &kLauncherStopTimeoutS,
    &kTraceBufferEntries,
    &kTraceDir,
    &kStallWarnS,
    &kStragglerIntervalS,
    &kStragglerDir,
    &kMetricsPort,
    &kMetricsAddr,
    &kAsGloo,
};

}  // namespace knobs
}  // namespace cohort
