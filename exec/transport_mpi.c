/* transport_mpi.c: the MPI transport and driver: one process per rank (mpirun -np P pipelab run
 * --transport mpi), the same worker code (exec_run_rank) over nonblocking point-to-point
 * messages, clocks aligned to rank 0's, the records gathered and assembled on rank 0.
 *
 * Messages: MPI_Isend of a private copy (the worker's buffer is free at once; the copies are
 * released as the sends complete: a send never waits for its receiver, whatever protocol MPI
 * uses for it) and MPI_Irecv polled with MPI_Test until it completes, the run is aborted, or
 * timeout_s passes. A worker posts its receives (post_recv: MPI_Irecv straight into its buffer,
 * tested once) where its list has the RECV and completes them (wait_recv) where its compute
 * needs the data. Tags encode the key: ((mb x stages + stage) x 2 + kind) mod
 * (MPI_TAG_UB + 1); MPI's non-overtaking order between a pair on one tag keeps a wrapped tag
 * unambiguous (its earlier use was received long before). Sizes are checked with MPI_Get_count.
 * Barriers exchange each rank's count of messages sent to every other (point to point on the
 * control communicator, so that a barrier that times out names the ranks that never came, and
 * only point-to-point receives are ever cancelled: cancelling a collective is erroneous), so a
 * message that no receive matched is found at the next barrier or at the end of the run.
 * Collectives (the set-up's, the steady rule's pass times, the host probe's, the profiles') are
 * started nonblocking and completed in a meeting (meet): each member also sends every other a
 * token, point to point, so that a collective that times out names the ranks that never came,
 * as the barrier does (mpi_wait.h); MPI_Comm_split (no nonblocking form) and the replicas'
 * all-reduce (its nonblocking form is slower: allreduce_i64) come right after a meeting; the
 * records and clocks go point to point, polled with the timeout too. A token carries its
 * meeting's kind (exec_meet_kind, one per place in the code that meets) and place (mtoken),
 * checked where it is received: one of a meeting of another kind or place is an internal error
 * naming both (meet_check); meetings of one kind that one member holds more often than another
 * pair among themselves (tokens pair in order) and are caught at the next meeting of another
 * kind. When several members time out in one meeting, or find it out of step, the
 * lowest-numbered says so and the others defer to it (meet_defer), so that the job prints one
 * line. After a timeout, or any meeting that left a request pending, the job ends (MPI_Abort,
 * here or in exec_mpi_finalize): the process cannot wait on the others any more, and nothing a
 * request left pending may use is released or reused before (mpi_wait.h): the collectives' and
 * the clocks' and records' buffers lie in the endpoint's scratch block (mscratch), kept with its
 * other buffers (mend_free_sends).
 * Faults: abort calls the hook (the CLI prints "rank R, action K (...): reason"), then
 * MPI_Abort(MPI_COMM_WORLD), which ends every process of the job; a killed process makes mpirun
 * end the job, terminating the others (SIGTERM): a terminated rank says what it was waiting for,
 * so the launcher's "process rank R exited on signal 9" comes with where the others stood. A
 * rank that stood still (stopped, or starved of CPU) says so instead, not what it had waited for:
 * the others timed out waiting for it; and time it stood still never counts against its own wait.
 * Cores: the job's processes on a host against the cores their affinity masks leave them
 * together, as the threads transport's ranks against its process's: more processes than cores is
 * refused unless exec_config.oversubscribe, then warned of in the result.
 * Clocks: CLOCK_MONOTONIC of each process, shifted onto rank 0's by a ping-pong (8 rounds per
 * rank; the round of least round-trip time; offset = midpoint of rank 0's send and
 * receive minus the rank's reading, so the error is at most half that round trip). */
#include <mpi.h>

#include "exec_drive.h"
#include "exec_int.h"
#include "mpi_wait.h"
#include "platform.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A wait spins on its request for its first spin_s seconds (mend.spin_s: EXEC_SPIN_S, the
 * threads transport's, when the job's processes on this host have a core each, else
 * MPI_SPIN_S), then naps MPI_NAP_US at a time. A nap of 20 us lasts about 70 (the kernel's timer
 * slack of 50 us), so a wait that napped ends up to that long after its message came. */
#define MPI_SPIN_S 1e-3
#define MPI_NAP_US 20L
#define MPI_NS_PER_US 1000L
/* Ping-pongs per rank of the clock alignment (the one of least round trip counts). */
#define MPI_CLOCK_PINGS 8
/* Tags a tag wraps at when MPI_TAG_UB is unknown (the standard's least MPI_TAG_UB + 1). */
#define MPI_MIN_TAGS 32768L
/* The per-peer message counts of an endpoint: sent, rcvd, peer_sent. */
#define MPI_COUNT_ARRAYS 3
/* Room beyond a message a receive buffer keeps, so that a longer message is seen as longer. */
#define MPI_RECV_SLACK_BYTES 64
/* Bytes of the SIGTERM report's head and of the wait it names. */
#define MPI_TERM_HEAD_MAX 64
#define MPI_WAIT_KEPT_MAX 224
/* A process that did not run for this long (s) stood still: stopped (SIGSTOP), or starved of CPU.
 * A wait does not count such a gap against its timeout, and the SIGTERM report says so. */
#define MPI_STOOD_S 0.5
#define MPI_CS_PER_S 100
/* Tags on the control communicator: the clock's ping-pong, the parts of a record; on any
 * communicator, the tokens of a meeting (a barrier's, with its message counts, too: one tag, so
 * that a token of another meeting is received, and named, rather than waited for). */
enum { TAG_PING = 1, TAG_PONG, TAG_REC_HEAD = 10, TAG_REC_ARRAYS, TAG_REC_OPS, TAG_REC_LOSS, TAG_REC_WEIGHTS, TAG_REC_ROUNDS,
       TAG_MEET = 20 };
/* Bytes of a token's place (mtoken.where, its NUL included). */
#define MPI_TOKEN_WHERE 60
/* The longest (s) a member that timed out in a meeting defers to a lower-numbered one
 * (meet_defer), and its naps meanwhile (us). The job's end after that one's MPI_Abort reaches a
 * deferring process through the launcher: on a loaded host (3 processes on 2 cores, the tests
 * beside them) that took over 1 s, and the deferring one printed a second line. */
#define MPI_DEFER_S 5.0
#define MPI_DEFER_NAP_US 1000L
/* The parts of a record after its head (send_record), each a message of its own. */
#define MPI_REC_PARTS 5
/* The most nonblocking collectives one meeting completes (host_check's pairs). */
#define MPI_MEET_COLLS 2
/* What a rank does, for its SIGTERM report (g_waiting): computing, polling a request
 * (wait_poll), inside a blocking collective (the replicas' all-reduce). */
enum { MW_NONE = 0, MW_POLL, MW_BLOCKED };
/* The names of the test-only EXEC_MPI_TEST_STOP_ENV's stop points (mpi_wait.h, EXEC_MTS_*). */
static const char *const mts_name[EXEC_MTS_POINTS] = {"", "barrier", "wait", "probe", "join", "allreduce", "steady", "gather",
                                                      "profile", "extra"};
/* The names of the meetings' kinds (exec_meet_kind), in meet_check's message. */
static const char *const meet_kind_name[EXEC_MEET_KINDS] = {
    "none", "host-enter", "host-cores", "host-pair", "host-worst", "host-name", "join-hosts", "join-comms", "stage-split",
    "barrier", "test-extra", "pass-times", "replicas", "run-end", "gather", "p2p-ready", "p2p-end", "ar-ready", "ar-sync",
    "ar-reduce", "ar-end", "probe-all", "probe-alone"};

/* One send in flight: its request and its private copy of the data. */
typedef struct msend {
    MPI_Request req;
    unsigned char *buf;
    size_t cap;
    int busy;
} msend;

/* One posted receive (m_post_recv): its request, key and expected size. */
typedef struct mpost {
    MPI_Request req;
    MPI_Status st;
    int src, done;
    exec_msg_key key;
    size_t bytes;
} mpost;

/* A meeting's token (meet), from each member to every other: the meeting's kind
 * (exec_meet_kind) and where its sender meets (the `where` of meet, alike on every member, cut
 * to MPI_TOKEN_WHERE - 1 bytes), whether its sender waits without a deadline (patient: it never
 * times out, meet_defer), and a barrier's payload (the messages its sender sent to the receiver
 * so far; else 0). */
typedef struct mtoken {
    int64_t payload;
    int32_t kind, patient;
    char where[MPI_TOKEN_WHERE];
} mtoken;

/* Header of a record sent to rank 0. */
typedef struct rec_head {
    int64_t passes, n_ops, n_weights, n_loss, core, allocated_bytes, model_peak_bytes, has_prof, n_round_f;
    exec_mem peak;
    double prof_s[EXEC_PROF_KINDS];
    double window[EXEC_WINDOWS];
} rec_head;

/* Bytes of a mask of the cores (host_share). */
#define MPI_MASK_BYTES (EXEC_MAX_CORES / 8)

/* An endpoint's scratch block (mend.scratch): the buffers of the requests one function leaves to
 * MPI, one function's at a time (each completes its requests, or its timeout ends the job),
 * which outlive the function when it returns after a timeout (kept: mend_free_sends). */
typedef union mscratch {
    struct {
        unsigned char mine[MPI_MASK_BYTES], all[MPI_MASK_BYTES]; /* this process's cores, the host's */
        int both, pair_all; /* processes 0 and 1 on this host; on one host */
    } share; /* host_share */
    struct {
        int mine[2], worst[2]; /* processes beyond the cores of this host, rank; the most of them, its rank */
        int sum, job_cores;    /* this host's cores (its first process), the job's */
        int there[2];          /* the processes and cores of the worst host */
        char host[MPI_MAX_PROCESSOR_NAME];
    } check; /* host_check */
    struct {
        int ln[2];          /* this host's processes; their least over the job */
        MPI_Comm dup[2];    /* data, control */
    } join; /* mpi_join */
    struct {
        double t, t0, t_r; /* the ping-pong's readings */
    } clock;          /* clock_offset */
    rec_head head;    /* send_record, recv_record */
    struct {
        int ok, all_ok; /* this process's memory; every one's */
    } p2p;            /* exec_mpi_profile_p2p */
    unsigned char user[EXEC_MPI_SCRATCH_BYTES]; /* exec_mpi_end_scratch */
} mscratch;

/* One endpoint (exec_transport.impl). */
typedef struct mend {
    MPI_Comm data, ctl;   /* tensors; control (barriers, clocks, records) */
    int rank, size, stages;
    long tag_mod;         /* MPI_TAG_UB + 1 */
    double timeout_s;
    double spin_s;        /* a wait's spin before it naps (host_spin) */
    double coll_spin_s;   /* the all-reduce's meeting (allreduce_i64): all of it when each process has a core */
    int patient;          /* 1 while its waits have no deadline: this process waits for others that work
                           * (exec_mpi_meet_patient), who are not late */
    msend *send;          /* [nsend] */
    int nsend;
    int64_t *sent, *rcvd, *peer_sent; /* [size] each: messages sent to / received from each rank so
                           * far, and (after a barrier) what each rank sent to this one */
    MPI_Request *xreq;    /* [2 size + MPI_MEET_COLLS] a meeting's receives of the tokens, then its
                           * sends, then its collectives */
    mtoken *tok;          /* [2 size] a meeting's tokens: those it sends, then those it receives */
    mscratch *scratch;    /* the buffers of requests left to MPI (mscratch) */
    unsigned char *rbuf;  /* receive buffer of rcap bytes */
    size_t rcap;
    mpost *post;          /* [npost] receives posted and not completed yet (grown by pl_grow) */
    size_t npost, cap_post;
    MPI_Comm *stage_comm; /* [stages] the replicas of each replicated stage this rank is one of
                           * (MPI_COMM_NULL elsewhere): the all-reduce's communicator */
    int job_cores;        /* the cores of the job's hosts (host_check) */
    int barriers;         /* barriers between passes entered so far */
    int test_stop;        /* EXEC_MTS_*: where EXEC_MPI_TEST_STOP_ENV stops this rank (tests only) */
    char warning[sizeof ((exec_result *)0)->warning]; /* oversubscription (host_check), for rank 0's result */
} mend;

static void (*g_abort_hook)(const pl_err *why);
static int g_inited; /* 1 when exec_mpi_run called MPI_Init_thread */
static int g_timed_out; /* 1 when a wait of this process timed out, or a meeting left a request pending
                        * otherwise (an MPI error, meetings out of step: meet): the job must end (mpi_wait.h) */
static int g_test_stopped; /* 1 when the test hook stopped this process (it stops it once) */

/* What this rank waits for now, for the report of a rank that the launcher terminates (when
 * another rank died or aborted): written before g_waiting is set, read only by on_term. */
static char g_term_head[MPI_TERM_HEAD_MAX]; /* "pipelab: rank R terminated by the MPI launcher " */
static char g_wait_what[MPI_WAIT_KEPT_MAX];
static volatile sig_atomic_t g_waiting; /* MW_* */
/* Whether this rank stood still (MPI_STOOD_S) and the others timed out waiting for it, for
 * on_term; times in centiseconds after g_base_s (CLOCK_MONOTONIC): g_alive_cs, when the rank last
 * polled a wait or ended one; g_cpu_cs, its process's CPU time at g_cpu_at_cs, the last end of a
 * wait that napped (from there on, until the next such wait, the rank computes or spins: it uses
 * all the time it is given; the CPU clock, a system call, is read as such a wait starts napping,
 * where it delays nothing, and its naps taken as no CPU time);
 * g_stood_cs, how long it last stood still, until g_stood_end_cs (reported for g_timeout_cs after,
 * the time the others take to give up: the launcher continues a stopped rank before it
 * terminates it, and the rank may run on a little before its SIGTERM comes). */
static double g_base_s;
static volatile sig_atomic_t g_alive_cs, g_cpu_cs, g_cpu_at_cs, g_stood_cs, g_stood_end_cs, g_timeout_cs;

/* Returns the process's CPU time in centiseconds (async-signal-safe). */
static long cpu_cs(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (long)ts.tv_sec * MPI_CS_PER_S + ts.tv_nsec / (EXEC_NS_PER_S / MPI_CS_PER_S);
}

/* Returns now (pl_now_s) in centiseconds after g_base_s (async-signal-safe: clock_gettime). */
static long alive_cs_at(double now) { return (long)((now - g_base_s) * MPI_CS_PER_S); }

/* Notes that the rank runs at now (a wait polled or ended). */
static void note_alive(double now) { g_alive_cs = (sig_atomic_t)alive_cs_at(now); }

/* Notes the process's CPU time at now (a compute long enough to check, the end of a blocking
 * collective). */
static void note_cpu(double now) {
    g_cpu_cs = (sig_atomic_t)cpu_cs();
    g_cpu_at_cs = (sig_atomic_t)alive_cs_at(now);
}

/* Notes that the rank stood still for cs centiseconds until now (centiseconds). */
static void note_stood(long cs, long now) {
    if (cs < (long)(MPI_STOOD_S * MPI_CS_PER_S)) return;
    g_stood_cs = (sig_atomic_t)cs;
    g_stood_end_cs = (sig_atomic_t)now;
}

/* Returns how long (centiseconds) the rank has not run lately, as far as it can tell: in a wait,
 * the time since its last poll; computing, the time since its CPU time was noted (note_cpu) less
 * the CPU time it used since; inside a blocking collective, 0 (MPI's own wait, unobserved).
 * Async-signal-safe. */
static long stood_cs(double now) {
    if (g_waiting == MW_POLL) return alive_cs_at(now) - g_alive_cs;
    if (g_waiting == MW_NONE) return alive_cs_at(now) - g_cpu_at_cs - (cpu_cs() - g_cpu_cs);
    return 0;
}

/* Writes s to stderr (async-signal-safe). */
/* The SIGTERM report being put together (on_term), and its length; written at once, so that the
 * launcher's SIGKILL, which follows its SIGTERM within moments on a loaded host, never leaves
 * half a line (a run under ctest -j2 ended one after "terminated by the MPI launcher "). */
static char g_term_line[MPI_TERM_HEAD_MAX + MPI_WAIT_KEPT_MAX + 128];
static size_t g_term_len;

/* Appends s to g_term_line, as much as fits (async-signal-safe). */
static void term_puts(const char *s) {
    for (; *s && g_term_len + 1 < sizeof g_term_line; s++) g_term_line[g_term_len++] = *s;
}

/* Appends cs centiseconds as seconds with one decimal ("3.1") to g_term_line (async-signal-safe). */
static void term_put_s(long cs) {
    char b[32];
    int i = (int)sizeof b;
    long ds = cs / (MPI_CS_PER_S / 10);
    b[--i] = '\0';
    b[--i] = (char)('0' + ds % 10);
    b[--i] = '.';
    ds /= 10;
    do b[--i] = (char)('0' + ds % 10); while ((ds /= 10) > 0 && i > 0);
    term_puts(&b[i]);
}

/* SIGTERM handler of an MPI rank: writes where the rank stood in one write (async-signal-safe:
 * write and clock_gettime only), then dies of the signal as it would have without the handler.
 * A rank that stood still says so rather than what it waited for: the others' wait for it timed
 * out. */
static void on_term(int sig) {
    double now = pl_now_s();
    long stood = stood_cs(now);
    if (alive_cs_at(now) - g_stood_end_cs <= g_timeout_cs && g_stood_cs > stood) stood = g_stood_cs;
    g_term_len = 0;
    term_puts(g_term_head);
    if (stood >= (long)(MPI_STOOD_S * MPI_CS_PER_S)) {
        term_puts("after it stood still for ");
        term_put_s(stood);
        term_puts(" s (stopped, or starved of CPU): the others waited for it, not it for them");
    } else if (g_waiting) {
        term_puts("while it waited: ");
        term_puts(g_wait_what);
    } else {
        term_puts("while it computed");
    }
    g_term_line[g_term_len++] = '\n'; /* room kept by term_puts */
    ssize_t w = write(2, g_term_line, g_term_len);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Installs on_term for rank r (once per process). */
static void report_on_term(int r) {
    snprintf(g_term_head, sizeof g_term_head, "pipelab: rank %d terminated by the MPI launcher ", r);
    g_base_s = pl_now_s();
    note_alive(g_base_s);
    note_cpu(g_base_s);
    g_stood_cs = g_stood_end_cs = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &sa, NULL);
}

/* Ends the whole job: the hook reports why (when why is not NULL), then MPI_Abort. Does not
 * return. The launcher's SIGTERM then finds this rank without on_term: it said why itself. */
static _Noreturn void abort_job(const pl_err *why) {
    signal(SIGTERM, SIG_DFL);
    if (why && g_abort_hook) g_abort_hook(why);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* not reached */
}

int exec_mpi_available(void) { return 1; }

void exec_mpi_set_abort_hook(void (*hook)(const pl_err *why)) { g_abort_hook = hook; }

int exec_mpi_profile_unbind(void) { return exec_platform_unbind_self(); }

/* A process that is done waits for the others at a barrier it polls every FINALIZE_NAP_US. */
#define FINALIZE_NAP_US 1000L

static void nap(long us);

/* A process done before the others (`pipelab profile --transport mpi`'s processes but the first,
 * while that one profiles the blocks and the threads' hand-off alone) first waits for them at a
 * barrier it polls with naps of a millisecond: MPI_Finalize's own wait keeps a core busy, and
 * the first process then timed its threads' hand-off 20 times slower (latency 18 us against
 * 0.1-1) and its W 10% slower. That wait has no timeout: rank 0 may profile and predict for
 * minutes after the others are done. A process whose wait timed out (its caller printed why)
 * ends the job instead: the others may never come. */
void exec_mpi_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (g_timed_out && !fin) abort_job(NULL);
    if (g_inited && !fin) {
        MPI_Request rq;
        if (MPI_Ibarrier(MPI_COMM_WORLD, &rq) == MPI_SUCCESS) {
            int done = 0;
            while (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) nap(FINALIZE_NAP_US);
        }
        MPI_Finalize();
    }
    g_inited = 0;
}

/* Returns the endpoint's rank. */
static int m_rank(const exec_transport *t) { return ((const mend *)t->impl)->rank; }
/* Returns the number of ranks. */
static int m_size(const exec_transport *t) { return ((const mend *)t->impl)->size; }

/* Reads EXEC_MPI_TEST_STOP_ENV ("R:name", a name of mts_name; tests only) into m->test_stop. */
static void test_stop_parse(mend *m) {
    const char *v = getenv(EXEC_MPI_TEST_STOP_ENV);
    int r = -1;
    char where[16] = "";
    m->test_stop = EXEC_MTS_NONE;
    if (g_test_stopped || !v || sscanf(v, "%d:%15s", &r, where) != 2 || r != m->rank) return;
    for (int k = EXEC_MTS_NONE + 1; k < EXEC_MTS_POINTS; k++)
        if (strcmp(where, mts_name[k]) == 0) m->test_stop = k;
}

/* Stops this rank (SIGSTOP), once, when EXEC_MPI_TEST_STOP_ENV named it at point (tests only):
 * as a process stopped or starved of CPU there would, it leaves the others waiting. */
static void test_stop_at(mend *m, int point) {
    if (m->test_stop != point) return;
    m->test_stop = EXEC_MTS_NONE;
    g_test_stopped = 1;
    raise(SIGSTOP);
}

/* Returns the tag of a message key (see the file comment). */
static int tag_of(const mend *m, exec_msg_key k) {
    unsigned long long v = ((unsigned long long)k.mb * (unsigned long long)m->stages + (unsigned long long)k.stage) * 2ull +
                           (unsigned long long)k.kind;
    return (int)(v % (unsigned long long)m->tag_mod);
}

/* Sleeps about us microseconds (the waits poll). */
static void nap(long us) {
    struct timespec ts = {0, us * MPI_NS_PER_US};
    nanosleep(&ts, NULL);
}

/* Polls the n requests req until they all complete (PL_OK; st, when n is 1, filled), one fails
 * (PL_EINPUT, MPI's error), or the deadline dl passes (PL_EINTERNAL, "timed out after T s:
 * what", g_timed_out set; the requests stay as they are, for the caller to look at and release);
 * spins for spin_s after t0, then naps. A gap of MPI_STOOD_S or more between two polls is time
 * this process did not run (stopped, or starved of CPU): it moves the deadline as far (the
 * others were not late), and is kept for the SIGTERM report (note_stood). *cpu_nap: the process's CPU time as the
 * wait began to nap (cpu_cs), -1 when it did not. */
static int wait_poll(mend *m, MPI_Request *req, int n, MPI_Status *st, const char *what, double t0, double dl, double spin_s,
                     long *cpu_nap, pl_err *e) {
    double last = t0;
    *cpu_nap = -1;
    if (m->barriers >= 2 && n == 1) test_stop_at(m, EXEC_MTS_WAIT); /* a message's wait in pass 1 */
    for (;;) {
        int flag = 0;
        int rc = n == 1 ? MPI_Test(req, &flag, st ? st : MPI_STATUS_IGNORE) : MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            return pl_errf(e, PL_EINPUT, "%s (while %s)", msg, what); /* e.g. a message too large */
        }
        double now = pl_now_s();
        if (now - last >= MPI_STOOD_S) {
            dl += now - last;
            note_stood((long)((now - last) * MPI_CS_PER_S), alive_cs_at(now));
        }
        last = now;
        note_alive(now);
        if (flag) return PL_OK;
        if (now > dl) {
            g_timed_out = 1;
            return pl_errf(e, PL_EINTERNAL, "timed out after %g s: %s", m->timeout_s, what);
        }
        if (now - t0 > spin_s) { /* spun out: poll gently */
            if (*cpu_nap < 0) *cpu_nap = cpu_cs();
            nap(MPI_NAP_US);
        }
    }
}

/* Waits for the n requests req (what describes the wait), spinning spin_s before it naps:
 * returns PL_OK (st, when n is 1, filled), or an error after timeout_s (never while m->patient;
 * the requests still pending; see wait_poll). While it waits, a SIGTERM from the launcher reports what (on_term). */
static int wait_reqs(mend *m, MPI_Request *req, int n, MPI_Status *st, const char *what, double spin_s, pl_err *e) {
    double t0 = pl_now_s(), dl = m->patient ? HUGE_VAL : t0 + m->timeout_s;
    g_waiting = MW_NONE;
    if (alive_cs_at(t0) - g_cpu_at_cs >= (long)(MPI_STOOD_S * MPI_CS_PER_S)) {
        /* computed or spun that long (rarely: the CPU clock is a system call): did it run? */
        note_stood(stood_cs(t0), alive_cs_at(t0));
        note_cpu(t0);
    }
    snprintf(g_wait_what, sizeof g_wait_what, "%s", what);
    g_waiting = MW_POLL;
    long cpu_nap = -1;
    int rc = wait_poll(m, req, n, st, what, t0, dl, spin_s, &cpu_nap, e);
    if (cpu_nap >= 0) { /* it napped: not CPU time, unlike what follows until the next wait that naps */
        g_cpu_cs = (sig_atomic_t)cpu_nap;
        g_cpu_at_cs = g_alive_cs; /* its last poll */
    }
    g_waiting = MW_NONE;
    return rc;
}

/* Waits for the point-to-point request req as wait_reqs; after a timeout, cancels and frees it
 * when it is a receive (`recv`; a send is left to the abort that follows). */
static int wait_req(mend *m, MPI_Request *req, MPI_Status *st, int recv, const char *what, pl_err *e) {
    int rc = wait_reqs(m, req, 1, st, what, m->spin_s, e);
    if (rc != PL_OK && recv && *req != MPI_REQUEST_NULL) {
        MPI_Cancel(req);
        MPI_Request_free(req);
    }
    return rc;
}

/* Releases the copies of sends that completed. */
static void reap_sends(mend *m) {
    for (int i = 0; i < m->nsend; i++)
        if (m->send[i].busy) {
            int flag = 0;
            MPI_Test(&m->send[i].req, &flag, MPI_STATUS_IGNORE);
            if (flag) m->send[i].busy = 0;
        }
}

/* Starts a nonblocking send of a private copy of data to dst; returns PL_OK or an error. */
static int m_send(exec_transport *t, int dst, exec_msg_key key, const void *data, size_t bytes, pl_err *e) {
    mend *m = t->impl;
    if (dst < 0 || dst >= m->size) return pl_errf(e, PL_EINPUT, "send to rank %d of %d", dst, m->size);
    if (bytes > (size_t)0x7fffffff) return pl_errf(e, PL_EINPUT, "message of %zu bytes is too large", bytes);
    reap_sends(m);
    int i = 0;
    while (i < m->nsend && m->send[i].busy) i++;
    if (i == m->nsend) {
        msend *n = pl_reallocarray(m->send, (size_t)m->nsend + 1, sizeof *n);
        if (!n) return pl_errf(e, PL_ENOMEM, "out of memory for a send");
        m->send = n;
        memset(&n[m->nsend++], 0, sizeof *n);
    }
    msend *s = &m->send[i];
    if (s->cap < bytes) {
        unsigned char *b = realloc(s->buf, bytes ? bytes : 1);
        if (!b) return pl_errf(e, PL_ENOMEM, "out of memory for a send of %zu bytes", bytes);
        s->buf = b;
        s->cap = bytes;
    }
    memcpy(s->buf, data, bytes);
    int rc = MPI_Isend(s->buf, (int)bytes, MPI_BYTE, dst, tag_of(m, key), m->data, &s->req);
    if (rc != MPI_SUCCESS) return pl_errf(e, PL_EINTERNAL, "MPI_Isend to rank %d failed (%d)", dst, rc);
    s->busy = 1;
    m->sent[dst]++;
    return PL_OK;
}

/* Describes the wait for key from src into buf. */
static void wait_what(const mend *m, int src, exec_msg_key key, char *buf, size_t n) {
    snprintf(buf, n, "rank %d waits for %s of stage %d microbatch %lld from rank %d", m->rank,
             exec_msg_what(key.kind), key.stage, (long long)key.mb, src);
}

/* Checks a completed receive from src (counted) against the expected bytes. */
static int recv_done(mend *m, int src, const MPI_Status *st, size_t bytes, pl_err *e) {
    m->rcvd[src]++;
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    if ((size_t)n != bytes) return pl_errf(e, PL_EINPUT, "message from rank %d has %d bytes, expected %zu", src, n, bytes);
    return PL_OK;
}

/* Posts the receive of key from src straight into data (bytes: a longer message is an MPI
 * truncation error, a shorter one fails the size check) and tests it once. Returns PL_OK or an
 * error. */
static int m_post_recv(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e) {
    mend *m = t->impl;
    if (bytes > (size_t)0x7fffffff) return pl_errf(e, PL_EINPUT, "message of %zu bytes is too large", bytes);
    mpost *np = pl_grow(m->post, &m->cap_post, m->npost, EXEC_FIRST_POSTS, sizeof *np);
    if (!np) return pl_errf(e, PL_ENOMEM, "out of memory posting a receive");
    m->post = np;
    mpost *p = &m->post[m->npost];
    memset(p, 0, sizeof *p);
    p->src = src;
    p->key = key;
    p->bytes = bytes;
    int rc = MPI_Irecv(data, (int)bytes, MPI_BYTE, src, tag_of(m, key), m->data, &p->req);
    if (rc != MPI_SUCCESS) return pl_errf(e, PL_EINTERNAL, "MPI_Irecv from rank %d failed (%d)", src, rc);
    m->npost++;
    rc = MPI_Test(&p->req, &p->done, &p->st);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING], what[EXEC_WAIT_TEXT_MAX];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        wait_what(m, src, key, what, sizeof what);
        return pl_errf(e, PL_EINPUT, "%s (while %s)", msg, what);
    }
    reap_sends(m);
    return PL_OK;
}

/* Completes the receive posted for (src, key), polling with the timeout (wait_req) unless it
 * completed already; checks its size. Returns PL_OK or an error naming what was awaited. */
static int m_wait_recv(exec_transport *t, int src, exec_msg_key key, pl_err *e) {
    mend *m = t->impl;
    size_t i = 0;
    while (i < m->npost && !(m->post[i].src == src && m->post[i].key.kind == key.kind && m->post[i].key.stage == key.stage &&
                             m->post[i].key.mb == key.mb))
        i++;
    if (i == m->npost)
        return pl_errf(e, PL_EINTERNAL, "no receive of %s of stage %d microbatch %lld from rank %d was posted",
                       exec_msg_what(key.kind), key.stage, (long long)key.mb, src);
    mpost p = m->post[i];
    m->post[i] = m->post[--m->npost];
    int rc = PL_OK;
    if (!p.done) {
        char what[EXEC_WAIT_TEXT_MAX];
        wait_what(m, src, key, what, sizeof what);
        rc = wait_req(m, &p.req, &p.st, 1, what, e);
    }
    if (rc == PL_OK) rc = recv_done(m, src, &p.st, p.bytes, e);
    reap_sends(m);
    return rc;
}

/* Receives the message key from src into data (exactly bytes), polling with the timeout.
 * Returns PL_OK or an error naming what was awaited. */
static int m_recv(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e) {
    mend *m = t->impl;
    if (bytes + MPI_RECV_SLACK_BYTES > m->rcap) {
        unsigned char *b = realloc(m->rbuf, bytes + MPI_RECV_SLACK_BYTES);
        if (!b) return pl_errf(e, PL_ENOMEM, "out of memory for a receive of %zu bytes", bytes);
        m->rbuf = b;
        m->rcap = bytes + MPI_RECV_SLACK_BYTES;
    }
    MPI_Request req;
    MPI_Status st;
    int rc = MPI_Irecv(m->rbuf, (int)m->rcap, MPI_BYTE, src, tag_of(m, key), m->data, &req);
    if (rc != MPI_SUCCESS) return pl_errf(e, PL_EINTERNAL, "MPI_Irecv from rank %d failed (%d)", src, rc);
    char what[EXEC_WAIT_TEXT_MAX];
    wait_what(m, src, key, what, sizeof what);
    rc = wait_req(m, &req, &st, 1, what, e);
    if (rc) return rc;
    rc = recv_done(m, src, &st, bytes, e);
    if (rc) return rc;
    memcpy(data, m->rbuf, bytes);
    reap_sends(m);
    return PL_OK;
}

/* Returns the rank in the job of member q of comm. */
static int job_rank(MPI_Comm comm, int q) {
    MPI_Group g, w;
    int r = q;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS) return q;
    MPI_Comm_group(MPI_COMM_WORLD, &w);
    MPI_Group_translate_ranks(g, 1, &q, w, &r);
    MPI_Group_free(&g);
    MPI_Group_free(&w);
    return r;
}

/* Fills the token t of a meeting of kind at `where` (mtoken). */
static void token_fill(mtoken *t, exec_meet_kind kind, int64_t payload, int patient, const char *where) {
    memset(t, 0, sizeof *t);
    t->kind = (int32_t)kind;
    t->payload = payload;
    t->patient = patient;
    snprintf(t->where, sizeof t->where, "%s", where);
}

/* Returns 1 when member q's token of the meeting in progress (its receive m->xreq[q]) came. */
static int token_came(const mend *m, int q) {
    int done = 1;
    if (m->xreq[q] != MPI_REQUEST_NULL) MPI_Request_get_status(m->xreq[q], &done, MPI_STATUS_IGNORE);
    return done;
}

/* Names in buf the members of comm (n of them, by their rank in the job) whose tokens have not
 * come (their receives m->xreq[q] pending) after a meeting timed out, or says what else it
 * waited for: its collectives (ncoll of them), or its own tokens (the counts when `counts`) to
 * be taken. */
static void meet_late(const mend *m, MPI_Comm comm, int n, int ncoll, int counts, char *buf, size_t len) {
    size_t k = 0;
    int late = 0;
    for (int q = 0; q < n; q++) {
        if (token_came(m, q)) continue;
        int w = snprintf(buf + k, len - k, "%s%d", late ? ", " : "", job_rank(comm, q));
        if (w > 0 && (size_t)w < len - k) k += (size_t)w;
        late++;
    }
    if (!late)
        snprintf(buf, len, "%s", ncoll ? "the others to complete it" : counts ? "its counts to be taken" : "its tokens to be taken");
}

/* Returns 1 when token t (its place made a string) comes from a meeting of kind at `where`. */
static int token_matches(mtoken *t, exec_meet_kind kind, const char *where) {
    char mine[MPI_TOKEN_WHERE];
    snprintf(mine, sizeof mine, "%s", where); /* as token_fill cuts it */
    t->where[sizeof t->where - 1] = '\0';
    return t->kind == (int32_t)kind && strcmp(t->where, mine) == 0;
}

static void meet_defer(const mend *m, MPI_Comm comm, int n, int me, int out_of_step, exec_meet_kind kind, const char *where);

/* Checks the tokens that came to a meeting of kind on comm (n members, this one me), at `where`:
 * one of a meeting of another kind or place means that the members' meetings are out of step, as
 * when one member held a meeting the others did not; in-order delivery alone would have paired
 * them wrong. (Meetings of this kind that one member holds more often than another pair among
 * themselves, unseen here: the next meeting of another kind finds them.) Returns PL_OK, or
 * PL_EINTERNAL naming both meetings (g_timed_out set: its collectives may be pending, or paired
 * with another meeting's; the job must end), said after meet_defer. */
static int meet_check(mend *m, MPI_Comm comm, int n, int me, exec_meet_kind kind, const char *where, pl_err *e) {
    for (int q = 0; q < n; q++) {
        if (q == me || !token_came(m, q)) continue;
        mtoken *t = &m->tok[m->size + q];
        if (token_matches(t, kind, where)) continue;
        g_timed_out = 1;
        int tk = t->kind > EXEC_MEET_NONE && t->kind < EXEC_MEET_KINDS ? t->kind : EXEC_MEET_NONE;
        pl_errf(e, PL_EINTERNAL, "internal error: meetings out of step: rank %d meets %s (meeting '%s'), rank %d's token "
                "came from its meeting %s (meeting '%s')", m->rank, where, meet_kind_name[kind], job_rank(comm, q), t->where,
                meet_kind_name[tk]);
        meet_defer(m, comm, n, me, 1, kind, where);
        return PL_EINTERNAL;
    }
    return PL_OK;
}

/* After a meeting of kind at `where` on comm (n members, this one me) timed out or was found out
 * of step, the rule that makes one line of the job say so. After a timeout, every member whose
 * token came (of this meeting: meet_check) waits for the same ranks as this one does and times
 * out about when it does; the lowest-numbered of them in the job that waits with a deadline (its
 * token says so) prints the line. Out of step, every member whose token of another meeting came
 * received this one's token in that meeting, and finds it out of step too; the lowest-numbered
 * of them and this one prints the line. It does so at once, and ends the job. The others defer
 * to it: they wait up to MPI_DEFER_S, quietly (the launcher's
 * SIGTERM then ends them without on_term's report, where they stood being that line's), for that
 * end, and say their own only when the job is still there after it (that member did not time
 * out, or find the meetings out of step: the late ones' tokens reached it; or it did later). A
 * wait for one message knows of no other waiter: each rank that times out there prints its own
 * line, naming the message it waited for. */
static void meet_defer(const mend *m, MPI_Comm comm, int n, int me, int out_of_step, exec_meet_kind kind, const char *where) {
    int first = m->rank;
    for (int q = 0; q < n; q++) {
        if (q == me || !token_came(m, q)) continue;
        mtoken *t = &m->tok[m->size + q];
        int same = token_matches(t, kind, where);
        if (out_of_step ? same : t->patient) continue; /* in step; a patient member never times out */
        int r = job_rank(comm, q);
        if (r < first) first = r;
    }
    if (first == m->rank) return;
    struct sigaction quiet, was;
    memset(&quiet, 0, sizeof quiet);
    quiet.sa_handler = SIG_DFL;
    sigemptyset(&quiet.sa_mask);
    sigaction(SIGTERM, &quiet, &was);
    double until = pl_now_s() + MPI_DEFER_S;
    while (pl_now_s() < until) nap(MPI_DEFER_NAP_US);
    sigaction(SIGTERM, &was, NULL);
}

/* Releases a timed-out meeting's requests: its receives cancelled, its sends left to complete
 * (MPI_Request_free; their tokens live as long as m, kept after a timeout: mend_free_sends), its
 * collectives left as they are (cancelling or freeing a collective is erroneous: the job ends
 * instead). */
static void meet_release(mend *m, int n) {
    for (int q = 0; q < n; q++) {
        if (m->xreq[q] != MPI_REQUEST_NULL) {
            MPI_Cancel(&m->xreq[q]);
            MPI_Request_free(&m->xreq[q]);
        }
        if (m->xreq[n + q] != MPI_REQUEST_NULL) MPI_Request_free(&m->xreq[n + q]);
    }
}

/* Meets every other member of comm: sends each member q a token of this meeting (mtoken: its
 * kind, `where`, and out[q] when out is not NULL) and receives theirs (their payloads
 * into in[q]; in[self] = out[self]) on TAG_MEET, point to point, and completes the ncoll
 * nonblocking collectives coll[] started on comm with them, all polled with the timeout
 * (spinning spin_s before it naps). No member's token comes before that member arrived, so it
 * is a barrier, and a timeout names the members that never came. kind is the place in the code
 * that meets, `where` where this rank waits ("at the barrier between passes"), both alike on
 * every member. Returns PL_OK, PL_EINPUT (MPI's error), PL_EINTERNAL when a token of a meeting of
 * another kind or place came (meet_check), or after the timeout PL_EINTERNAL "timed out after T
 * s: rank R waits WHERE for rank(s) Q" (the tokens' receives cancelled; said after meet_defer).
 * Every error leaves requests pending (the collectives, at least): g_timed_out is set, the job
 * must end. */
static int meet(mend *m, MPI_Comm comm, const int64_t *out, int64_t *in, MPI_Request *coll, int ncoll, double spin_s,
                exec_meet_kind kind, const char *where, pl_err *e) {
    int n = 0, me = 0, nr = 0;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    if (n > m->size || ncoll > MPI_MEET_COLLS) {
        g_timed_out = 1; /* coll[] pending */
        return pl_errf(e, PL_EINTERNAL, "a meeting of %d members and %d collectives", n, ncoll);
    }
    mtoken *tout = m->tok, *tin = m->tok + m->size;
    for (int q = 0; q < n; q++) {
        m->xreq[q] = m->xreq[n + q] = MPI_REQUEST_NULL;
        if (q == me) continue;
        token_fill(&tout[q], kind, out ? out[q] : 0, m->patient, where);
        if (MPI_Irecv(&tin[q], (int)sizeof *tin, MPI_BYTE, q, TAG_MEET, comm, &m->xreq[q]) != MPI_SUCCESS ||
            MPI_Isend(&tout[q], (int)sizeof *tout, MPI_BYTE, q, TAG_MEET, comm, &m->xreq[n + q]) != MPI_SUCCESS) {
            g_timed_out = 1; /* the tokens posted so far and coll[] pending */
            return pl_errf(e, PL_EINTERNAL, "meeting rank %d %s failed", job_rank(comm, q), where);
        }
    }
    for (nr = 2 * n; nr < 2 * n + ncoll; nr++) {
        m->xreq[nr] = coll[nr - 2 * n];
        coll[nr - 2 * n] = MPI_REQUEST_NULL;
    }
    char what[EXEC_WAIT_TEXT_MAX];
    snprintf(what, sizeof what, "rank %d waits %s", m->rank, where);
    int rc = wait_reqs(m, m->xreq, nr, NULL, what, spin_s, e);
    if (rc == PL_OK) {
        rc = meet_check(m, comm, n, me, kind, where, e);
        for (int q = 0; rc == PL_OK && in && q < n; q++) in[q] = q == me ? out[q] : tin[q].payload;
        return rc;
    }
    if (rc != PL_EINTERNAL) { /* MPI's error: the requests' states unknown */
        g_timed_out = 1;
        return rc;
    }
    if (meet_check(m, comm, n, me, kind, where, e) == PL_OK) { /* else a token of another meeting says more */
        char late[EXEC_WAIT_TEXT_MAX];
        meet_late(m, comm, n, ncoll, out != NULL, late, sizeof late);
        int several = strchr(late, ',') != NULL;
        pl_errf(e, rc, "timed out after %g s: %s for %s%s", m->timeout_s, what,
                isdigit((unsigned char)late[0]) ? (several ? "ranks " : "rank ") : "", late);
        meet_defer(m, comm, n, me, 0, kind, where);
    }
    meet_release(m, n);
    return rc;
}

/* Returns rc; an error of this rank's own (not of an action) gets "rank R: " before it. */
static int own_err(const mend *m, int rc, pl_err *e) {
    if (rc != PL_OK && pl_err_rank(e) < 0) {
        pl_err_prefix(e, "rank %d: ", m->rank);
        pl_err_set_rank(e, m->rank);
    }
    return rc;
}

/* Completes the ncoll collectives coll[] started on comm in a meeting (meet, no payload), waiting
 * as a message's wait does. Returns PL_OK or meet's error. */
static int coll_wait(mend *m, MPI_Comm comm, MPI_Request *coll, int ncoll, exec_meet_kind kind, const char *where,
                     pl_err *e) {
    return meet(m, comm, NULL, NULL, coll, ncoll, m->spin_s, kind, where, e);
}

/* Waits for every rank while exchanging the message counts (a meeting on the control
 * communicator whose tokens carry the counts: each rank sends sent[q] to every other rank q and
 * receives theirs; point to point, so that a timeout names the ranks that never came), then
 * checks that this rank received every message sent to it: at the barrier between passes and at
 * the end of the run, each rank has walked its whole list, so a message sent to it and not
 * received never will be. kind, when: EXEC_MEET_BARRIER, "barrier between passes", or
 * EXEC_MEET_RUN_END, "end of the run". Returns PL_OK or
 * an error naming the sender, this rank and (when it has arrived) the message, or, after the
 * timeout, this rank and the ranks it waited for. */
static int exchange_counts(mend *m, exec_meet_kind kind, const char *when, pl_err *e) {
    int P = m->size;
    char where[EXEC_WAIT_TEXT_MAX];
    snprintf(where, sizeof where, "at the %s", when);
    int rc = own_err(m, meet(m, m->ctl, m->sent, m->peer_sent, NULL, 0, m->spin_s, kind, where, e), e);
    if (rc != PL_OK) return rc;
    for (int q = 0; q < P; q++) {
        if (m->peer_sent[q] == m->rcvd[q]) continue;
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(q, MPI_ANY_TAG, m->data, &flag, &st);
        long tag = flag ? st.MPI_TAG : -1;
        if (tag >= 0 && m->stages > 0) /* the key back from the tag (exact unless the tags wrapped) */
            pl_errf(e, PL_EINPUT, "rank %d sent %s of stage %ld microbatch %ld to rank %d, which never received "
                    "them (%lld sent, %lld received, at the %s)", q, tag % 2 == EXEC_MSG_ACT ? "activations" : "gradients",
                    (tag / 2) % m->stages, (tag / 2) / m->stages, m->rank, (long long)m->peer_sent[q],
                    (long long)m->rcvd[q], when);
        else
            pl_errf(e, PL_EINPUT, "rank %d sent %lld messages to rank %d, which never received %lld of them (at the %s)", q,
                    (long long)m->peer_sent[q], m->rank, (long long)(m->peer_sent[q] - m->rcvd[q]), when);
        pl_err_set_rank(e, q); /* the sender's error */
        return PL_EINPUT;
    }
    return PL_OK;
}

static void m_abort(exec_transport *t, const pl_err *why);

/* The exact all-reduce of v[count] on comm (MPI_SUM or MPI_MAX of int64: exact, so any
 * algorithm MPI picks gives the bits of the threads' ring): a meeting of comm's members first
 * (meet: timed, so that a replica that does not come is named after the timeout), then
 * MPI_Allreduce, blocking, among members that all came. Blocking, so that MPI progresses it at
 * its own pace: MPI_Iallreduce polled to completion took 1.45 times as long on 2 processes and
 * 4.2 M values (148.7 ms against 103.0 ms, Open MPI 4.1's libnbc against its tuned all-reduce),
 * and the meeting adds one exchange of empty messages (a few microseconds). So a replica that
 * stops inside the all-reduce itself, after it came, is not timed here: one that dies there makes
 * mpirun end the job (this rank then reports, from its SIGTERM handler, that it waited in the
 * all-reduce). Returns PL_OK or an error. */
static int allreduce_i64(mend *m, MPI_Comm comm, int64_t *v, size_t count, int max, exec_meet_kind kind, const char *where,
                         pl_err *e) {
    if (count > (size_t)INT_MAX) return pl_errf(e, PL_EINPUT, "all-reduce of %zu values is too large", count);
    int rc = meet(m, comm, NULL, NULL, NULL, 0, m->coll_spin_s, kind, where, e);
    if (rc != PL_OK) return rc;
    g_waiting = MW_NONE;
    snprintf(g_wait_what, sizeof g_wait_what, "rank %d waits %s", m->rank, where);
    g_waiting = MW_BLOCKED;
    rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_INT64_T, max ? MPI_MAX : MPI_SUM, comm);
    note_cpu(pl_now_s());
    g_waiting = MW_NONE;
    return rc == MPI_SUCCESS ? PL_OK : pl_errf(e, PL_EINTERNAL, "MPI_Allreduce %s failed", where);
}

/* The all-reduce of v[count] over the replicas of stage (exec_transport.allreduce): allreduce_i64
 * on the stage's communicator. A replica that fails aborts the job (MPI_Abort), one that dies
 * makes mpirun end it (this rank then reports, from its SIGTERM handler, that it waited in the
 * all-reduce), one that stands still is named after the timeout. Returns PL_OK or an error. */
static int m_allreduce(exec_transport *t, int stage, int64_t *v, size_t count, int max, pl_err *e) {
    mend *m = t->impl;
    if (stage < 0 || stage >= m->stages || m->stage_comm[stage] == MPI_COMM_NULL)
        return pl_errf(e, PL_EINTERNAL, "rank %d is no replica of stage %d", m->rank, stage);
    if (m->barriers >= 2) test_stop_at(m, EXEC_MTS_ALLREDUCE); /* its first all-reduce in pass 1 */
    char where[EXEC_WAIT_TEXT_MAX];
    snprintf(where, sizeof where, "in the all-reduce of stage %d's replicas", stage);
    return allreduce_i64(m, m->stage_comm[stage], v, count, max, EXEC_MEET_REPLICAS, where, e);
}

/* The max of v[count] over every rank (exec_transport.allmax, the steady rule's pass times,
 * between two passes): MPI_Iallreduce on the control communicator, completed in a meeting as
 * the barrier's; on an error (a timeout: "rank R: timed out ... for rank Q") ends the job at
 * once, as the barrier does. Returns PL_OK. */
static int m_allmax(exec_transport *t, double *v, size_t count, pl_err *e) {
    mend *m = t->impl;
    test_stop_at(m, EXEC_MTS_STEADY);
    MPI_Request rq;
    int rc = count > (size_t)INT_MAX ? pl_errf(e, PL_EINPUT, "max of %zu values is too large", count)
             : MPI_Iallreduce(MPI_IN_PLACE, v, (int)count, MPI_DOUBLE, MPI_MAX, m->ctl, &rq) != MPI_SUCCESS
                 ? pl_errf(e, PL_EINTERNAL, "MPI_Iallreduce of the pass times failed")
                 : coll_wait(m, m->ctl, &rq, 1, EXEC_MEET_PASS_TIMES, "at the exchange of the pass times", e);
    if (own_err(m, rc, e) != PL_OK) m_abort(t, e);
    return PL_OK;
}

/* Makes the communicator of each replicated stage among its replicas (collective over every
 * process: MPI_Comm_split, which has no nonblocking form: a meeting of every process first, so
 * that one that stands still before it is named; the splits then follow one another at once).
 * Returns PL_OK, PL_ENOMEM or the meeting's error. */
static int stage_comms(mend *m, const sched *s, const exec_layout *L, pl_err *e) {
    m->stage_comm = pl_calloc((size_t)s->stages, sizeof *m->stage_comm);
    if (!m->stage_comm) return pl_errf(e, PL_ENOMEM, "out of memory");
    int any = 0;
    for (int q = 0; q < s->stages; q++) {
        m->stage_comm[q] = MPI_COMM_NULL;
        any |= L->reps[q] > 1;
    }
    int rc = any ? own_err(m, coll_wait(m, m->ctl, NULL, 0, EXEC_MEET_STAGE_SPLIT, "at the start of the run", e), e) : PL_OK;
    for (int q = 0; rc == PL_OK && q < s->stages; q++) {
        m->stage_comm[q] = MPI_COMM_NULL;
        if (L->reps[q] <= 1) continue;
        int mine = L->srank[m->rank] == s->stage_rank[q];
        MPI_Comm_split(m->data, mine ? 0 : MPI_UNDEFINED, L->rep[m->rank], &m->stage_comm[q]);
    }
    return rc;
}

/* Frees the stage communicators. */
static void stage_comms_free(mend *m, int stages) {
    for (int q = 0; m->stage_comm && q < stages; q++)
        if (m->stage_comm[q] != MPI_COMM_NULL) MPI_Comm_free(&m->stage_comm[q]);
    free(m->stage_comm);
    m->stage_comm = NULL;
}

/* Waits for every rank and checks that every message sent so far was received
 * (exchange_counts); on an error (a message nobody received, a timeout) ends the job at once, as
 * a failing action does: the ranks are no longer in step. Returns PL_OK. */
static int m_barrier(exec_transport *t, pl_err *e) {
    mend *m = t->impl;
    if (++m->barriers == 2) {
        test_stop_at(m, EXEC_MTS_BARRIER);
        if (m->test_stop == EXEC_MTS_EXTRA) { /* tests only: a meeting the others do not hold */
            m->test_stop = EXEC_MTS_NONE;
            g_test_stopped = 1;
            int rc = coll_wait(m, m->ctl, NULL, 0, EXEC_MEET_TEST_EXTRA, "at the test hook's extra meeting", e);
            if (own_err(m, rc, e) != PL_OK) m_abort(t, e);
        }
    }
    if (exchange_counts(m, EXEC_MEET_BARRIER, "barrier between passes", e) != PL_OK) m_abort(t, e);
    return PL_OK;
}

/* Ends the whole job (abort_job: the hook reports why, then MPI_Abort). Does not return. */
static void m_abort(exec_transport *t, const pl_err *why) {
    (void)t;
    abort_job(why);
}

/* Checks with the other ranks that every message sent was received (exchange_counts; first, so
 * that a send nobody receives is reported at once rather than waited for), then completes the
 * sends still in flight (their receivers took them in their last pass); ends the job on an error. */
static void m_finished(exec_transport *t) {
    mend *m = t->impl;
    pl_err ec;
    if (exchange_counts(m, EXEC_MEET_RUN_END, "end of the run", &ec) != PL_OK) m_abort(t, &ec);
    for (int i = 0; i < m->nsend; i++)
        if (m->send[i].busy) {
            pl_err e;
            if (wait_req(m, &m->send[i].req, MPI_STATUS_IGNORE, 0, "a send waits for its receiver", &e) != PL_OK) {
                pl_err_prefix(&e, "rank %d: ", m->rank);
                pl_err_set_rank(&e, m->rank);
                m_abort(t, &e);
            }
            m->send[i].busy = 0;
        }
}

/* ---------------------------------------------------------------- the driver */

/* Measures rank r's clock offset to rank 0 (add it to r's times) into *off by ping-pong; rank 0
 * gets 0. Every rank calls it for every r (collective over ctl); each message is waited for with
 * the timeout. Returns PL_OK or the error ("rank R: timed out ... for rank Q"). */
static int clock_offset(mend *m, int r, double *off, pl_err *e) {
    double *t = &m->scratch->clock.t, *t0 = &m->scratch->clock.t0, *t_r = &m->scratch->clock.t_r; /* a timeout leaves
                                                                       * their requests pending (mscratch) */
    double best = HUGE_VAL;
    char what[EXEC_WAIT_TEXT_MAX];
    snprintf(what, sizeof what, "rank %d waits at the clock alignment for rank %d", m->rank, m->rank == 0 ? r : 0);
    *off = 0;
    for (int k = 0; k < MPI_CLOCK_PINGS && (m->rank == 0 || m->rank == r); k++) {
        MPI_Request rq[2];
        int rc;
        if (m->rank == 0) {
            *t0 = pl_now_s();
            MPI_Irecv(t, 1, MPI_DOUBLE, r, TAG_PONG, m->ctl, &rq[0]);
            MPI_Isend(t0, 1, MPI_DOUBLE, r, TAG_PING, m->ctl, &rq[1]);
            rc = wait_reqs(m, rq, 2, NULL, what, m->spin_s, e);
            double t1 = pl_now_s();
            if (rc == PL_OK && t1 - *t0 < best) {
                best = t1 - *t0;
                *off = 0.5 * (*t0 + t1) - *t;
            }
        } else {
            MPI_Irecv(t, 1, MPI_DOUBLE, 0, TAG_PING, m->ctl, &rq[0]);
            rc = wait_reqs(m, rq, 1, NULL, what, m->spin_s, e);
            *t_r = pl_now_s();
            if (rc == PL_OK) {
                MPI_Isend(t_r, 1, MPI_DOUBLE, 0, TAG_PONG, m->ctl, &rq[0]);
                rc = wait_reqs(m, rq, 1, NULL, what, m->spin_s, e);
            }
        }
        if (rc != PL_OK) return own_err(m, rc, e); /* the job ends: the requests are left */
    }
    return PL_OK;
}

/* One message of a record: count items of type at buf, on tag. */
typedef struct rec_part {
    void *buf;
    int count;
    MPI_Datatype type;
    int tag;
} rec_part;

/* Sends (send 1) or receives the n parts of a record (those of count 0 left out, on both sides)
 * to or from peer on ctl, all posted at once and waited for together with the timeout. Returns
 * PL_OK or the error ("rank R: timed out ... at the gathering of the records for rank Q"; the
 * requests are left: the job ends). */
static int record_parts(mend *m, const rec_part *p, int n, int peer, int send, pl_err *e) {
    MPI_Request rq[MPI_REC_PARTS + 1];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (p[i].count == 0) continue;
        int rc = send ? MPI_Isend(p[i].buf, p[i].count, p[i].type, peer, p[i].tag, m->ctl, &rq[k])
                      : MPI_Irecv(p[i].buf, p[i].count, p[i].type, peer, p[i].tag, m->ctl, &rq[k]);
        if (rc != MPI_SUCCESS) return own_err(m, pl_errf(e, PL_EINTERNAL, "passing a record with rank %d failed", peer), e);
        k++;
    }
    char what[EXEC_WAIT_TEXT_MAX];
    snprintf(what, sizeof what, "rank %d waits at the gathering of the records for rank %d", m->rank, peer);
    return own_err(m, wait_reqs(m, rq, k, NULL, what, m->spin_s, e), e);
}

/* Sends rank m->rank's record to rank 0 (tags 10..15 on ctl). Returns PL_OK or the error. */
static int send_record(mend *m, const exec_rank_record *r, size_t n_loss, pl_err *e) {
    rec_head *h = &m->scratch->head; /* a timeout leaves its send pending (mscratch) */
    *h = (rec_head){r->passes, (int64_t)r->n_ops, (int64_t)r->n_weights, (int64_t)n_loss, r->core,
                  (int64_t)r->allocated_bytes, (int64_t)r->model_peak_bytes, r->has_prof, (int64_t)r->n_round_f, r->peak,
                  {0}, {0}};
    memcpy(h->prof_s, r->prof_s, sizeof h->prof_s);
    memcpy(h->window, r->window, sizeof h->window);
    rec_part p[MPI_REC_PARTS + 1] = {
        {h, (int)sizeof *h, MPI_BYTE, TAG_REC_HEAD},
        {r->pass_start_s, EXEC_REC_ARRAYS * r->passes, MPI_DOUBLE, TAG_REC_ARRAYS},
        {r->ops, (int)(r->n_ops * sizeof *r->ops), MPI_BYTE, TAG_REC_OPS},
        {r->loss_mb, (int)n_loss, MPI_DOUBLE, TAG_REC_LOSS},
        {r->weights, (int)r->n_weights, MPI_FLOAT, TAG_REC_WEIGHTS},
        {r->round_f, 2 * (int)r->n_round_f, MPI_DOUBLE, TAG_REC_ROUNDS}};
    return record_parts(m, p, MPI_REC_PARTS + 1, 0, 1, e);
}

/* Receives rank src's record on rank 0 into r (arrays owned by r, exec_rank_record_free).
 * Returns PL_OK, PL_ENOMEM or the error of a wait. */
static int recv_record(mend *m, int src, exec_rank_record *r, pl_err *e) {
    rec_head *h = &m->scratch->head; /* a timeout leaves its receive pending (mscratch) */
    memset(h, 0, sizeof *h);
    memset(r, 0, sizeof *r);
    rec_part ph = {h, (int)sizeof *h, MPI_BYTE, TAG_REC_HEAD};
    int rc = record_parts(m, &ph, 1, src, 0, e);
    if (rc != PL_OK) return rc;
    r->rank = src;
    r->passes = (int)h->passes;
    r->n_ops = (size_t)h->n_ops;
    r->n_weights = (size_t)h->n_weights;
    r->core = (int)h->core;
    r->allocated_bytes = (size_t)h->allocated_bytes;
    r->model_peak_bytes = (size_t)h->model_peak_bytes;
    r->peak = h->peak;
    r->has_prof = (int)h->has_prof;
    memcpy(r->prof_s, h->prof_s, sizeof r->prof_s);
    memcpy(r->window, h->window, sizeof r->window);
    r->pass_start_s = pl_calloc(EXEC_REC_ARRAYS * (size_t)r->passes, sizeof(double));
    r->ops = r->n_ops ? pl_calloc(r->n_ops, sizeof *r->ops) : NULL;
    r->loss_mb = pl_calloc((size_t)h->n_loss ? (size_t)h->n_loss : 1, sizeof(double));
    r->weights = pl_calloc(r->n_weights ? r->n_weights : 1, sizeof(float));
    r->n_round_f = (size_t)h->n_round_f;
    r->round_f = pl_calloc(r->n_round_f ? 2 * r->n_round_f : 1, sizeof(double));
    if (!r->pass_start_s || (r->n_ops && !r->ops) || !r->loss_mb || !r->weights || !r->round_f)
        return pl_errf(e, PL_ENOMEM, "out of memory receiving the record of rank %d", src);
    exec_rank_record_arrays(r);
    rec_part p[MPI_REC_PARTS] = {{r->pass_start_s, EXEC_REC_ARRAYS * r->passes, MPI_DOUBLE, TAG_REC_ARRAYS},
                                 {r->ops, (int)(r->n_ops * sizeof *r->ops), MPI_BYTE, TAG_REC_OPS},
                                 {r->loss_mb, (int)h->n_loss, MPI_DOUBLE, TAG_REC_LOSS},
                                 {r->weights, (int)r->n_weights, MPI_FLOAT, TAG_REC_WEIGHTS},
                                 {r->round_f, 2 * (int)r->n_round_f, MPI_DOUBLE, TAG_REC_ROUNDS}};
    return record_parts(m, p, MPI_REC_PARTS, src, 0, e);
}

/* Shifts every absolute time of a record by off seconds (onto rank 0's clock). */
static void shift_record(exec_rank_record *r, double off) {
    for (int p = 0; p < r->passes; p++) {
        r->pass_start_s[p] += off;
        r->pass_end_s[p] += off;
        if (r->ready_s[p] != 0) r->ready_s[p] += off;
    }
    for (size_t k = 0; k < r->n_ops; k++) {
        r->ops[k].start_s += off;
        r->ops[k].end_s += off;
    }
}

/* exec_int.h. Returns PL_OK, or PL_EINTERNAL when MPI_Init_thread fails. */
int exec_mpi_init(pl_err *e) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return PL_OK;
    int prov = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &prov) != MPI_SUCCESS)
        return pl_errf(e, PL_EINTERNAL, "MPI_Init_thread failed");
    g_inited = 1;
    return PL_OK;
}

static int mend_init(mend *m, double timeout_s, pl_err *e);

/* Counts the MPI job's processes on this process's host into *local, and the cores their
 * affinity masks cover together into *cores; *lead is 1 on the host's first process, else 0;
 * *pair (may be NULL) is 1 when the job's first two processes share a host (one clock), else 0.
 * Collective over MPI_COMM_WORLD, each collective completed in a meeting (`where` says where
 * this rank waits: "at the start of the run"); MPI_Comm_split_type has no nonblocking form, so
 * a meeting comes first. Returns PL_OK or the error of a meeting. */
static int host_share(mend *m, const char *where, int *local, int *cores, int *lead, int *pair, pl_err *e) {
    if (exec_mpi_timed_out(e) != PL_OK) return own_err(m, e->code, e);
    unsigned char *mine = m->scratch->share.mine, *all = m->scratch->share.all; /* the collectives' (mscratch) */
    memset(mine, 0, MPI_MASK_BYTES);
    memset(all, 0, MPI_MASK_BYTES);
    int cpus[EXEC_MAX_CORES], n = exec_platform_cores(cpus, EXEC_MAX_CORES);
    for (int i = 0; i < n; i++) mine[cpus[i] / 8] |= (unsigned char)(1u << (cpus[i] % 8));
    MPI_Comm node;
    MPI_Request rq;
    *local = 1;
    *cores = n;
    *lead = 1;
    if (pair) *pair = 0;
    int rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, NULL, 0, EXEC_MEET_HOST_ENTER, where, e), e);
    if (rc != PL_OK) return rc;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return PL_OK;
    int node_rank = 0;
    MPI_Comm_size(node, local);
    MPI_Comm_rank(node, &node_rank);
    *lead = node_rank == 0;
    MPI_Iallreduce(mine, all, MPI_MASK_BYTES, MPI_BYTE, MPI_BOR, node, &rq);
    rc = own_err(m, coll_wait(m, node, &rq, 1, EXEC_MEET_HOST_CORES, where, e), e);
    if (rc == PL_OK && pair) {
        MPI_Group world, here;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Comm_group(node, &here);
        int first[2] = {0, 1}, at[2] = {MPI_UNDEFINED, MPI_UNDEFINED};
        MPI_Group_translate_ranks(world, 2, first, here, at);
        m->scratch->share.both = at[0] != MPI_UNDEFINED && at[1] != MPI_UNDEFINED;
        MPI_Iallreduce(&m->scratch->share.both, &m->scratch->share.pair_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq);
        rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, &rq, 1, EXEC_MEET_HOST_PAIR, where, e), e);
        if (rc == PL_OK) *pair = m->scratch->share.pair_all;
        MPI_Group_free(&here);
        MPI_Group_free(&world);
    }
    if (rc != PL_OK) return rc; /* the job ends: nothing more of MPI's (a collective is pending) */
    MPI_Comm_free(&node);
    *cores = 0;
    for (int i = 0; i < MPI_MASK_BYTES; i++)
        for (unsigned v = all[i]; v; v &= v - 1) ++*cores;
    return PL_OK;
}

/* Sets m's spins for `local` processes of the job on `cores` cores of this host: a wait spins
 * EXEC_SPIN_S before it naps when each has a core (so a spinning process takes no other's), else
 * MPI_SPIN_S; the all-reduce's meeting (allreduce_i64) then spins throughout, as MPI's blocking
 * all-reduce after it does, else as a wait. */
static void host_spin(mend *m, int local, int cores) {
    m->spin_s = local <= cores ? EXEC_SPIN_S : MPI_SPIN_S;
    m->coll_spin_s = local <= cores ? HUGE_VAL : MPI_SPIN_S;
}

/* The job's processes against its cores, as the threads transport checks its ranks against its
 * process's cores: local processes on this host sharing cores (host_share; lead: this is the
 * host's first process). The host with the most processes beyond its cores is refused unless
 * cfg->oversubscribe, else named in m->warning; m->job_cores is the cores of all the job's hosts.
 * Collective over MPI_COMM_WORLD (completed in meetings, `where`): every process returns the
 * same. Returns PL_OK, the refusal, or the error of a meeting. */
static int host_check(mend *m, const exec_config *cfg, int local, int cores, int lead, const char *where, pl_err *e) {
    /* the collectives' buffers (mscratch): a timeout leaves a collective pending */
    int *mine = m->scratch->check.mine, *worst = m->scratch->check.worst, *there = m->scratch->check.there;
    int *sum = &m->scratch->check.sum, *job_cores = &m->scratch->check.job_cores;
    char *host = m->scratch->check.host;
    mine[0] = local - cores;
    mine[1] = m->rank;
    worst[0] = worst[1] = 0;
    *sum = lead ? cores : 0;
    MPI_Request rq[MPI_MEET_COLLS];
    MPI_Iallreduce(mine, worst, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD, &rq[0]);
    MPI_Iallreduce(sum, job_cores, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[1]);
    int rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, rq, 2, EXEC_MEET_HOST_WORST, where, e), e);
    if (rc != PL_OK) return rc;
    m->job_cores = *job_cores;
    there[0] = local;
    there[1] = cores;
    memset(host, 0, MPI_MAX_PROCESSOR_NAME);
    int len = 0;
    MPI_Get_processor_name(host, &len);
    MPI_Ibcast(there, 2, MPI_INT, worst[1], MPI_COMM_WORLD, &rq[0]);
    MPI_Ibcast(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, worst[1], MPI_COMM_WORLD, &rq[1]);
    rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, rq, 2, EXEC_MEET_HOST_NAME, where, e), e);
    if (rc != PL_OK) return rc;
    host[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
    m->warning[0] = '\0';
    if (worst[0] <= 0) return PL_OK;
    if (!cfg->oversubscribe)
        return pl_errf(e, PL_EINPUT, "%d ranks (MPI processes) on host %s but only %d cores available to them; give "
                       "pipelab's --oversubscribe (exec_config.oversubscribe; mpirun's alone is not enough) to run anyway "
                       "(timings would then measure time-slicing)", there[0], host, there[1]);
    snprintf(m->warning, sizeof m->warning, "%d ranks on %d cores: oversubscribed, timings measure time-slicing", there[0],
             there[1]);
    return PL_OK;
}

/* Opens m over every process of the job (MPI initialized), its waits of timeout_s (0: the
 * default), stopping here when the test hook names `stop`, then meets the others (host_share:
 * `where`; without a deadline when patient: this process may come first while another still
 * works, as the processes but 0 after a run while rank 0 assembles its records) to set its
 * spins; *one_clock (may be NULL) as host_share's pair. Returns PL_OK, or the error (m is to be
 * freed with mend_free_sends either way). */
static int world_open(mend *m, double timeout_s, int stop, int patient, const char *where, int *one_clock, pl_err *e) {
    memset(m, 0, sizeof *m);
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    int rc = mend_init(m, timeout_s, e);
    if (rc != PL_OK) return rc;
    test_stop_parse(m);
    test_stop_at(m, stop);
    int local = 0, cores = 0, lead = 0;
    m->patient = patient;
    rc = host_share(m, where, &local, &cores, &lead, one_clock, e);
    m->patient = 0;
    if (rc == PL_OK) host_spin(m, local, cores);
    return rc;
}

/* Joins the MPI job (initializing MPI when nobody has), checks that it has one process per rank
 * of the schedule's layout, and sets up m's communicators, tag space and message counters; the
 * set-up's collectives are completed in meetings ("at the start of the run"), so that a process
 * that stands still is named after the timeout. Returns PL_OK, or the error (m is to be freed
 * with mend_free_sends either way). */
static int mpi_join(const sched *s, const exec_config *cfg, mend *m, int *is_root, pl_err *e) {
    const char *const where = "at the start of the run";
    memset(m, 0, sizeof *m);
    if (exec_mpi_init(e) != PL_OK || exec_mpi_timed_out(e) != PL_OK) return e->code;
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    report_on_term(m->rank);
    *is_root = m->rank == 0;
    exec_layout lay;
    int lrc = exec_layout_build(s, cfg->replicas, &lay, e);
    int want = lay.ranks;
    exec_layout_free(&lay);
    if (lrc != PL_OK) return lrc;
    if (m->size != want)
        return pl_errf(e, PL_EINPUT, "the MPI job has %d processes, the schedule %d ranks%s (mpirun -np %d)", m->size, want,
                       want != s->ranks ? " with its replicas" : "", want);
    int rc = mend_init(m, cfg->timeout_s, e);
    if (rc != PL_OK) return rc;
    test_stop_parse(m);
    test_stop_at(m, EXEC_MTS_JOIN);
    int ln = m->size, hc = 0, lead = 0;
    rc = host_share(m, where, &ln, &hc, &lead, NULL, e);
    if (rc == PL_OK) rc = host_check(m, cfg, ln, hc, lead, where, e);
    if (rc != PL_OK) return rc;
    host_spin(m, ln, hc);
    MPI_Request rq[MPI_MEET_COLLS];
    int *ln_all = m->scratch->join.ln; /* the collectives' buffers (mscratch): a timeout leaves one pending */
    MPI_Comm *dup = m->scratch->join.dup;
    if (cfg->timed_passes_max > cfg->timed_passes) {
        /* the steady rule compares the processes' pass times on their own clocks (m_allmax):
         * one clock only when they share a host */
        ln_all[0] = ln;
        ln_all[1] = 0;
        MPI_Iallreduce(&ln_all[0], &ln_all[1], 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &rq[0]);
        rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, rq, 1, EXEC_MEET_JOIN_HOSTS, where, e), e);
        if (rc != PL_OK) return rc;
        if (ln_all[1] != m->size)
            return pl_errf(e, PL_EINPUT, "timing passes until the run is steady needs the MPI job's %d processes on one host (their "
                                         "clocks are compared); this job spans hosts", m->size);
    }
    MPI_Comm_idup(MPI_COMM_WORLD, &dup[0], &rq[0]);
    MPI_Comm_idup(MPI_COMM_WORLD, &dup[1], &rq[1]);
    rc = own_err(m, coll_wait(m, MPI_COMM_WORLD, rq, 2, EXEC_MEET_JOIN_COMMS, where, e), e);
    if (rc != PL_OK) return rc;
    m->data = dup[0];
    m->ctl = dup[1];
    MPI_Comm_set_errhandler(m->data, MPI_ERRORS_RETURN);
    m->stages = s->stages;
    return PL_OK;
}

/* Sets m's tag space, timeout (timeout_s, or the default when it is 0), spins (MPI_SPIN_S until
 * host_spin), message counters, tokens and scratch block for its m->size ranks. Returns PL_OK or PL_ENOMEM. */
static int mend_init(mend *m, double timeout_s, pl_err *e) {
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    m->tag_mod = flag && ub && *ub > 0 ? (long)*ub + 1 : MPI_MIN_TAGS;
    m->timeout_s = timeout_s > 0 ? timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    g_timeout_cs = (sig_atomic_t)(m->timeout_s < INT_MAX / MPI_CS_PER_S ? m->timeout_s * MPI_CS_PER_S : INT_MAX);
    m->spin_s = m->coll_spin_s = MPI_SPIN_S;
    m->sent = pl_calloc(MPI_COUNT_ARRAYS * (size_t)m->size, sizeof *m->sent);
    m->xreq = pl_calloc(2 * (size_t)m->size + MPI_MEET_COLLS, sizeof *m->xreq);
    m->tok = pl_calloc(2 * (size_t)m->size, sizeof *m->tok);
    m->scratch = pl_calloc(1, sizeof *m->scratch);
    if (!m->sent || !m->xreq || !m->tok || !m->scratch) {
        free(m->sent);
        free(m->xreq);
        free(m->tok);
        free(m->scratch);
        m->sent = NULL;
        m->xreq = NULL;
        m->tok = NULL;
        m->scratch = NULL;
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    m->rcvd = m->sent + m->size;
    m->peer_sent = m->rcvd + m->size;
    return PL_OK;
}

/* Releases m's sends (each waited for when `complete`, else cancelled), receive buffers,
 * counters, tokens and scratch block; once a request was left pending (g_timed_out: a timeout,
 * a meeting's error), none of them: the requests left (sends, a receive whose cancel came too
 * late, collectives, the clocks' and records' messages) may still use them, and the job ends
 * (MPI_Abort) with them kept. */
static void mend_free_sends(mend *m, int complete) {
    if (g_timed_out) return;
    for (int i = 0; i < m->nsend; i++) {
        if (m->send[i].busy) {
            if (complete) {
                MPI_Wait(&m->send[i].req, MPI_STATUS_IGNORE);
            } else {
                MPI_Cancel(&m->send[i].req);
                MPI_Request_free(&m->send[i].req);
            }
        }
        free(m->send[i].buf);
    }
    free(m->send);
    free(m->rbuf);
    free(m->post);
    free(m->sent);
    free(m->xreq);
    free(m->tok);
    free(m->scratch);
    m->tok = NULL;
    m->scratch = NULL;
    m->send = NULL;
    m->rbuf = NULL;
    m->post = NULL;
    m->sent = NULL;
    m->xreq = NULL;
    m->nsend = 0;
}

/* Brings every rank's record to rank 0 on its clock (a meeting, then the clock offsets) and
 * assembles the result there; other ranks send theirs. Every wait is timed; an error here (a
 * timeout, no memory on rank 0) ends the job, as a failing action does. rec is consumed. Returns
 * rc, or the assembly's error. */
static int mpi_gather(const sched *s, const exec_config *cfg, mend *m, exec_transport *t, exec_rank_record *rec,
                      exec_result *out, int rc, pl_err *e) {
    test_stop_at(m, EXEC_MTS_GATHER);
    if (own_err(m, coll_wait(m, m->ctl, NULL, 0, EXEC_MEET_GATHER, "at the gathering of the records", e), e) != PL_OK) m_abort(t, e);
    double *off = pl_calloc((size_t)m->size, sizeof *off);
    exec_rank_record *recs = m->rank == 0 ? pl_calloc((size_t)m->size, sizeof *recs) : NULL;
    if (!off || (m->rank == 0 && !recs)) {
        pl_errf(e, PL_ENOMEM, "rank %d: out of memory gathering the records", m->rank);
        pl_err_set_rank(e, m->rank);
        m_abort(t, e);
    }
    for (int r = 1; r < m->size; r++)
        if (clock_offset(m, r, &off[r], e) != PL_OK) m_abort(t, e);
    int M = (int)sched_total_microbatches(s);
    size_t n_loss = (size_t)rec->passes * (size_t)M;
    if (m->rank != 0) {
        if (send_record(m, rec, n_loss, e) != PL_OK) m_abort(t, e);
    } else {
        recs[0] = *rec;
        memset(rec, 0, sizeof *rec);
        for (int r = 1; r < m->size; r++) {
            if (recv_record(m, r, &recs[r], e) != PL_OK) m_abort(t, e);
            shift_record(&recs[r], off[r]);
        }
        if (rc == PL_OK) rc = exec_assemble(s, cfg, recs, out, e);
        if (rc == PL_OK) { /* as the threads transport's: the cores the ranks had, and the oversubscription */
            out->cores = m->job_cores;
            snprintf(out->warning, sizeof out->warning, "%s", m->warning);
        }
        for (int r = 0; r < m->size; r++) exec_rank_record_free(&recs[r]);
    }
    exec_rank_record_free(rec);
    free(recs);
    free(off);
    return rc;
}

int exec_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e) {
    memset(out, 0, sizeof *out);
    *is_root = 1;
    mend m;
    int rc = mpi_join(s, cfg, &m, is_root, e);
    if (rc != PL_OK) {
        if (g_timed_out) abort_job(e); /* a process stood still: the others cannot go on without it */
        mend_free_sends(&m, 0);
        signal(SIGTERM, SIG_DFL); /* each process reports the refusal itself */
        return rc;
    }
    exec_transport t = {&m, m_rank, m_size, m_send, m_recv, m_barrier, m_abort, m_finished, m_post_recv, m_wait_recv,
                        m_allreduce, m_allmax};
    exec_rank_record rec;
    memset(&rec, 0, sizeof rec);
    exec_layout lay;
    rc = exec_layout_build(s, cfg->replicas, &lay, e);
    if (rc == PL_OK) rc = stage_comms(&m, s, &lay, e);
    exec_layout_free(&lay);
    if (rc == PL_OK) rc = exec_run_rank(s, cfg, &t, &rec, e);
    if (rc != PL_OK) {
        pl_err why = *e;
        m_abort(&t, &why); /* errors before the workers ran end the job too */
    }
    rc = mpi_gather(s, cfg, &m, &t, &rec, out, rc, e); /* clocks, then the records to rank 0 */
    mend_free_sends(&m, 0); /* m_finished completed them all */
    stage_comms_free(&m, s->stages);
    MPI_Comm_free(&m.data);
    MPI_Comm_free(&m.ctl);
    signal(SIGTERM, SIG_DFL); /* the run is over: no more waits to report */
    return rc;
}

/* ---------------------------------------------------------------- the waits of the profiles */

/* mpi_wait.h. */
exec_mpi_end *exec_mpi_end_open(double timeout_s, int stop, int patient, const char *where, pl_err *e) {
    mend *m = pl_calloc(1, sizeof *m);
    if (!m) {
        pl_errf(e, PL_ENOMEM, "out of memory");
        return NULL;
    }
    if (world_open(m, timeout_s, stop, patient, where, NULL, e) != PL_OK) {
        exec_mpi_end_close(m);
        return NULL;
    }
    return m;
}

/* mpi_wait.h. */
void exec_mpi_end_close(exec_mpi_end *m) {
    if (!m) return;
    mend_free_sends(m, 0);
    free(m);
}

/* mpi_wait.h. */
void *exec_mpi_end_scratch(exec_mpi_end *m) { return m->scratch->user; }

/* mpi_wait.h. */
int exec_mpi_meet(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, exec_meet_kind kind, const char *where,
                  pl_err *e) {
    return own_err(m, coll_wait(m, comm, coll, ncoll, kind, where, e), e);
}

/* mpi_wait.h. */
int exec_mpi_meet_patient(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, exec_meet_kind kind,
                          const char *where, pl_err *e) {
    m->patient = 1;
    int rc = own_err(m, coll_wait(m, comm, coll, ncoll, kind, where, e), e);
    m->patient = 0;
    return rc;
}

/* mpi_wait.h. */
int exec_mpi_allreduce_i64(exec_mpi_end *m, MPI_Comm comm, int64_t *v, size_t count, int max, exec_meet_kind kind,
                           const char *where, pl_err *e) {
    return own_err(m, allreduce_i64(m, comm, v, count, max, kind, where, e), e);
}

/* mpi_wait.h. */
int exec_mpi_timed_out(pl_err *e) {
    if (!g_timed_out) return PL_OK;
    return pl_errf(e, PL_EINTERNAL, "not run: a wait of this process timed out or failed before (or its meetings fell out "
                                    "of step), and the MPI job is ending");
}

/* ---------------------------------------------------------------- the hand-off's profile */

int exec_mpi_profile_p2p(const exec_config *cfg, int reps, exec_p2p *out, int *is_root, pl_err *e) {
    const char *const where = "in the hand-off profile";
    memset(out, 0, sizeof *out);
    *is_root = 1;
    if (exec_mpi_init(e) != PL_OK || exec_mpi_timed_out(e) != PL_OK) return e->code;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *is_root = me == 0;
    if (size < 2)
        return pl_errf(e, PL_EINPUT, "the hand-off profile of the MPI transport needs 2 processes or more, the job has %d "
                                     "(mpirun -np 2)", size);
    size_t bytes[EXEC_P2P_SIZES];
    int rounds = 0;
    exec_p2p_plan(cfg, reps, bytes, &rounds);
    double *rt = pl_calloc(EXEC_P2P_SERIES * EXEC_P2P_SIZES * (size_t)rounds, sizeof *rt);
    void *buf = pl_calloc(2, bytes[EXEC_P2P_SIZES - 1]); /* exec_p2p_side's two halves */
    size_t nsweep = me < 2 ? exec_p2p_sweep_floats(cfg) : 0;
    exec_p2p_sweep sw = {me < 2 ? exec_lines_alloc(nsweep, cfg->small_pages) : NULL, nsweep};
    mend w, m; /* the job's waits; the pair's transport */
    memset(&m, 0, sizeof m);
    int one_clock = 0, complete = 0;
    /* after a run the processes but 0 come first, while rank 0 assembles the records */
    int rc = world_open(&w, cfg->timeout_s, EXEC_MTS_PROFILE, me != 0, where, &one_clock, e);
    if (rc == PL_OK) {
        m.rank = me;
        m.size = 2;
        m.stages = 1;
        int *ok = &w.scratch->p2p.ok, *all_ok = &w.scratch->p2p.all_ok; /* the collective's (mscratch) */
        *ok = rt && buf && (me >= 2 || (sw.p && mend_init(&m, cfg->timeout_s, e) == PL_OK));
        *all_ok = 0;
        m.spin_s = w.spin_s; /* the run's waits */
        MPI_Request rq;
        MPI_Iallreduce(ok, all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &rq); /* no process leaves the others waiting */
        rc = own_err(&w, coll_wait(&w, MPI_COMM_WORLD, &rq, 1, EXEC_MEET_P2P_READY, where, e), e);
        if (rc == PL_OK && !*all_ok) rc = pl_errf(e, PL_ENOMEM, "out of memory for the hand-off profile");
    }
    MPI_Comm pair = MPI_COMM_NULL;
    if (rc == PL_OK) MPI_Comm_split(MPI_COMM_WORLD, me < 2 ? 0 : MPI_UNDEFINED, me, &pair); /* right after the meeting */
    if (pair != MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN);
        m.data = m.ctl = pair;
        exec_transport t = {&m, m_rank, m_size, m_send, m_recv, m_barrier, m_abort, m_finished, m_post_recv, m_wait_recv, NULL,
                            NULL};
        rc = exec_p2p_side(&t, me, bytes, rounds, one_clock, buf, &sw, rt, e);
        complete = rc == PL_OK; /* after a whole ping-pong the partner took every send */
    }
    mend_free_sends(&m, complete);
    if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
    if (!g_timed_out && w.xreq) { /* every process, whatever its outcome: the others wait here, idle and
                                   * without a deadline, while the two time (the two's own waits are timed) */
        pl_err ew;
        w.patient = me >= 2;
        int rw = own_err(&w, coll_wait(&w, MPI_COMM_WORLD, NULL, 0, EXEC_MEET_P2P_END, where, &ew), &ew);
        w.patient = 0;
        if (rc == PL_OK && rw != PL_OK) {
            rc = rw;
            *e = ew;
        }
    }
    mend_free_sends(&w, 0);
    int one_way = exec_p2p_one_way(one_clock, bytes);
    if (rc == PL_OK && me == 0) rc = exec_p2p_fit_all(bytes, rt, rounds, one_way, out, e);
    if (rc != PL_OK) pl_err_prefix(e, "profile of the MPI hand-off: ");
    free(rt);
    free(sw.p);
    if (!g_timed_out) free(buf); /* else a receive posted into it may still complete: the job ends */
    return rc;
}
