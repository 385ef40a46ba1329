/* pptmc trace runtime: records the events the instrumentation pass inserts (see instrument/FORMAT.md).
 *
 * Trace mode (PPTMC_TRACE_OUT set): each thread appends 8-byte event words (block entries, control
 * events, and only those accesses its per-site stride predictors miss) to a buffer; a writer thread
 * re-encodes full buffers as varint events, compresses them with zstd and appends them as chunks;
 * a footer with block/edge counts and loop instances is written at exit.
 * Count mode (PPTMC_COUNTS_OUT set): only block and edge counters, written as JSON at exit.
 * Nothing here is called by the program itself except the XOMP_trace_* loop hooks (and `_exit`,
 * which the runtime interposes so that a program leaving through it still gets a footer).
 *
 * Crashes: fatal signals (and `_exit`) run emergency_flush(), which must be async-signal-safe:
 * it takes no blocking lock, never allocates (the zstd context, the compression buffer and the
 * count sums are allocated at start-up) and writes with write(2). The writer thread is stopped
 * between two chunks by a two-flag handshake (rt_state / writer_writing, both seq_cst), then the
 * queued buffers and the crashing thread's own buffer are appended and a footer saying
 * `complete: false` is written. Other threads' half-filled buffers are lost (they may be mid-update). */
#define _GNU_SOURCE
#define ZSTD_STATIC_LINKING_ONLY  /* ZSTD_initStaticCCtx: a context that never allocates */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

extern const char __pptmc_table_hash[];
extern const int __pptmc_n_sites;
extern const int __pptmc_n_blocks;
extern const int __pptmc_pred_off[];  /* block b's predecessors: __pptmc_pred[off[b] .. off[b+1]) */
extern const int __pptmc_pred[];
extern const int __pptmc_block_sites[];  /* block b's memory sites: the references one entry of it makes */
void __pptmc_turn_region_begin(uint32_t tid, const uint64_t *refs);  /* pptmc_turns.c: equal-speed turns */
void __pptmc_turn_region_end(void);
extern int xomp_trace_enabled __attribute__((weak));

#define FORMAT_VERSION 2
#define BUF_WORDS (1u << 19)   /* 4 MiB of 8-byte words per thread before a chunk is cut */
#define SLACK_WORDS 8u         /* the longest slow-path event */
#define ADDR_BITS 48           /* user-space addresses on x86-64/aarch64 fit in 48 bits */
#define ALT_STACK_BYTES (256u << 10)  /* per-thread signal stack: a stack overflow is still handled */
/* Distinct-line sketch (FORMAT.md, "distinct_lines"): a HyperLogLog of every access's 64-byte line, so
 * `pptmc profile` can bound its engines' memory before reading the trace. Hand-written because it must run
 * inside the inlined hot path with no allocation or library (a few lines; no maintained C library fits
 * there). 2^12 one-byte registers per thread (1.6 % standard error), merged by maximum into the footer. */
#define SKETCH_BITS 12
#define SKETCH_REGS (1u << SKETCH_BITS)
#define SKETCH_LINE_SHIFT 6
/* The registers live outside the program's heap, data and mmap area, so that they move none of the program's
 * allocations: one mapping, made before main at a fixed address far below the top-down mmap area and far
 * above the program and its heap, with a page per thread id (touched only by the threads that exist).
 * Threads with larger ids (or a system where that address is taken) get a page of their own from mmap,
 * which may move the program's later mappings. (The hook's code itself moves the program's data and heap
 * by whole pages, as any change to the inlined hooks does.) */
#define SKETCH_POOL_ADDR 0x100000000000ull  /* 16 TiB */
#define SKETCH_POOL_THREADS 1024u

/* Each site has a stride predictor (last address, last stride); an access whose address is
 * last + stride writes nothing. Otherwise the hot path writes one in-memory word:
 *   top 16 bits != 0: mispredicted access, site = top16 - 1, low 48 bits = address - prediction
 *   top 16 bits == 0: low 3 bits give the kind, the rest an id; fixed extra words follow.
 * The reader replays the predictors: a block entry implies each of its sites ran once. */
enum { W_BLOCK = 1, W_MEMN = 2, W_CTRL = 3, W_MEMBIG = 4 };
/* On-disk varint events (FORMAT.md): tag in the low 2 bits. */
enum { TAG_MEM = 0, TAG_BLOCK = 1, TAG_MEMN = 2, TAG_CTRL = 3 };
enum { C_REGION_BEGIN = 0, C_REGION_END = 1, C_LOOP_BEGIN = 2, C_ITER = 3, C_LOOP_END = 4, C_SYNC = 5,
       C_CALL_ENTER = 6, C_CALL_EXIT = 7 };
static const int ctrl_args[] = {3, 1, 5, 1, 1, 1, 1, 1};

typedef struct { uint64_t last, stride; } predictor;

struct job;

typedef struct tbuf {
    uint64_t *cur, *end;       /* the inlined hot path touches only these and `pred` */
    predictor *pred;           /* per site */
    uint8_t *sketch;           /* SKETCH_REGS registers: this thread's distinct-line sketch */
    struct tbuf *next;
    uint64_t *words;           /* the buffer being filled: bufs[slot] */
    uint64_t *bufs[2];         /* double buffering: the writer thread drains one while the other fills */
    int slot, busy[2];
    int in_flush;              /* 1 while `words` is queued but not yet swapped (the signal handler skips it) */
    struct job *jobs;
    uint64_t *bcount;          /* per-block entry counts */
    uint64_t *ecount;          /* per static CFG edge counts (index into __pptmc_pred) */
    uint64_t n_other_edges;    /* dynamic edges missing from the static CFG (should stay 0) */
    uint64_t refs;             /* memory sites run (block entries x their sites): the thread's virtual time */
    uint32_t tid;
    int depth;                 /* nesting of instrumented functions on this thread */
    int64_t region, loop, iter, region_seq;
    int64_t l_trip, l_chunk;   /* the current work-shared loop's trip count and chunk, for its pieces */
    int l_sched;
    uint64_t region_top;       /* the region's return-address slot: its frames lie below */
    int64_t c_region, c_loop, c_iter;  /* state at the start of the current chunk */
    uint64_t c_region_top;
    uint64_t stack_lo, stack_hi;
} tbuf;

/* A full buffer handed to the writer thread, with the state its chunk starts in. */
typedef struct job {
    struct job *next;
    tbuf *owner;
    int slot;
    const uint64_t *words;
    size_t n;
    uint32_t tid;
    int64_t region, loop, iter;
    uint64_t region_top, stack_lo, stack_hi;
} job;

/* The single writer thread encodes, compresses and appends chunks in submission order, so
 * the traced threads only fill buffers (on a 2-core machine this halves the traced time). */
static pthread_t writer_thread;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER, free_cond = PTHREAD_COND_INITIALIZER;
static job *queue_head, *queue_tail;
static int writer_stop;
static uint8_t *enc_buf;       /* varint encoding of one chunk (writer thread only) */
static uint64_t *last_addr;    /* per-site previous address, reset at every chunk start */
static ZSTD_CCtx *cctx;

static __thread tbuf *tls;
static __thread int is_writer;  /* set on the writer thread (its crash cannot flush: the file may be mid-chunk) */
static tbuf *all_threads;
/* error-checking, so a signal handler can tell whether its own thread holds it (unlock fails otherwise) */
static pthread_mutex_t lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static int out_fd = -1;
static int tracing, counting;
/* rt_state: who may still write the trace file. The destructor moves RUNNING to FINISHING, the
 * emergency path moves RUNNING to EMERGENCY; whoever wins the compare-and-swap writes the footer. */
enum { RT_OFF = 0, RT_RUNNING = 1, RT_FINISHING = 2, RT_EMERGENCY = 3 };
static int rt_state;
static int writer_writing;     /* the writer thread is between taking a job and finishing its chunk */
static int exit_status = -1;   /* the status passed to exit(), recorded by on_exit */
static uint8_t *comp_buf;      /* compressed chunk: 88-byte header + zstd frame */
static size_t comp_cap;
static uint64_t *sum_blocks, *sum_edges;  /* scratch for the footer's count sums */
static uint8_t *sketch_pool;  /* SKETCH_POOL_THREADS pages of registers, one per thread id */
static size_t buf_words = BUF_WORDS;  /* PPTMC_CHUNK_BYTES overrides it (tests use small chunks) */
static uint32_t next_tid;     /* one past the largest thread id given out (the footer's n_threads) */
static uint64_t tid_taken[65536 / 64];  /* thread ids in use (they are uint16 in the trace) */
extern int omp_get_thread_num(void) __attribute__((weak));  /* absent from a program without OpenMP */
static uint64_t n_chunks, total_acc, total_sized, file_crc;  /* sized: memcpy/memset/masked-lane events */
static int64_t loop_seq;
static int64_t *loops;        /* instance records: loop_id, trip, schedule, chunk */
static size_t loops_len, loops_cap;
static int loops_moving;      /* set while `loops` is reallocated: a crash footer then leaves them out */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

/* zlib-compatible CRC-32 so Python can check it with zlib.crc32. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void say(const char *a, const char *b) {
    /* write(2), not stdio: also used from signal handlers */
    if (write(2, a, strlen(a)) < 0 || write(2, b, strlen(b)) < 0 || write(2, "\n", 1) < 0) return;
}

__attribute__((noreturn)) static void exit_group(int status) {
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

__attribute__((noreturn)) static void die(const char *what) {
    say("pptmc runtime: ", what);
    exit_group(86);  /* not _exit: the runtime interposes it */
}

static void stack_bounds(tbuf *t) {
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    t->stack_lo = (uint64_t)addr;
    t->stack_hi = (uint64_t)addr + size;
}

/* Give the calling thread its own signal stack, so a stack overflow still reaches the handler. */
/* A new thread's id: its OpenMP thread number when the program has OpenMP and no other thread holds that
 * id, so a threaded trace's thread t is OpenMP thread t (the validator places threads on cores by it:
 * an L3 per CCX serves threads 0-3, ...); else the smallest free id. Called with `lock` held. */
static uint32_t claim_tid(void) {
    uint32_t id = 0;
    int num = omp_get_thread_num ? omp_get_thread_num() : -1;
    if (num >= 0 && num < 65536 && !(tid_taken[num / 64] >> (num % 64) & 1)) id = (uint32_t)num;
    else while (id < 65535 && (tid_taken[id / 64] >> (id % 64) & 1)) id++;
    tid_taken[id / 64] |= 1ULL << (id % 64);
    if (id + 1 > next_tid) next_tid = id + 1;
    return id;
}

static void alt_stack(void) {
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE)) return;
    stack_t ss = {.ss_sp = malloc(ALT_STACK_BYTES), .ss_size = ALT_STACK_BYTES, .ss_flags = 0};
    if (ss.ss_sp) sigaltstack(&ss, NULL);
}

/* Thread id `tid`'s sketch registers, zeroed: its page of the pool, else a page of its own. */
static uint8_t *sketch_page(uint32_t tid) {
    if (sketch_pool && tid < SKETCH_POOL_THREADS) return sketch_pool + (size_t)tid * SKETCH_REGS;
    void *p = mmap(NULL, SKETCH_REGS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("out of memory");
    return p;
}

/* Reserve the sketch pool at SKETCH_POOL_ADDR (left NULL where that address is taken). */
static void map_sketch_pool(void) {
    size_t bytes = (size_t)SKETCH_POOL_THREADS * SKETCH_REGS;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
#ifdef MAP_FIXED_NOREPLACE
    flags |= MAP_FIXED_NOREPLACE;  /* older kernels take it as a hint: checked below */
#endif
    void *p = mmap((void *)SKETCH_POOL_ADDR, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return;
    if ((uint64_t)p != SKETCH_POOL_ADDR) { munmap(p, bytes); return; }
    sketch_pool = p;
}

__attribute__((noinline, cold)) static tbuf *tb_init(void) {
    tbuf *t = calloc(1, sizeof *t);
    if (!t) die("out of memory");
    t->bcount = calloc((size_t)__pptmc_n_blocks + 1, sizeof *t->bcount);
    t->ecount = calloc((size_t)__pptmc_pred_off[__pptmc_n_blocks] + 1, sizeof *t->ecount);
    if (!t->bcount || !t->ecount) die("out of memory");
    if (tracing) {
        t->bufs[0] = malloc(buf_words * sizeof(uint64_t));
        t->bufs[1] = malloc(buf_words * sizeof(uint64_t));
        t->jobs = calloc(2, sizeof(job));
        if (!t->bufs[0] || !t->bufs[1] || !t->jobs) die("out of memory");
        /* fault the pages in now, not during the first region */
        memset(t->bufs[0], 0, buf_words * sizeof(uint64_t));
        memset(t->bufs[1], 0, buf_words * sizeof(uint64_t));
        t->words = t->cur = t->bufs[0];
        t->pred = calloc((size_t)__pptmc_n_sites + 1, sizeof *t->pred);
        if (!t->pred) die("out of memory");
        t->end = t->words + buf_words - SLACK_WORDS;
    }
    t->region = t->loop = t->c_region = t->c_loop = -1;
    t->iter = t->c_iter = -1;
    stack_bounds(t);
    if (tracing) alt_stack();
    pthread_mutex_lock(&lock);
    t->tid = claim_tid();
    if (tracing) t->sketch = sketch_page(t->tid);  /* before it is listed: the footer reads every listed one */
    t->next = all_threads;
    all_threads = t;
    pthread_mutex_unlock(&lock);
    tls = t;
    return t;
}

static inline tbuf *tb(void) {
    tbuf *t = tls;
    return __builtin_expect(t != NULL, 1) ? t : tb_init();
}

static inline void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Unbuffered write(2) of whole chunks: at any moment the file ends at a chunk boundary unless a
 * write is in progress, which the emergency path waits out. Returns 0, or -1 on failure. */
static int write_all(const void *p, size_t n) {
    const uint8_t *c = p;
    while (n) {
        ssize_t k = write(out_fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline uint8_t *varint(uint8_t *restrict p, uint64_t v) {
    if (__builtin_expect(v < 0x80, 1)) { *p = (uint8_t)v; return p + 1; }
    while (v >= 0x80) { *p++ = (uint8_t)(v | 0x80); v >>= 7; }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline uint8_t *mem_event(uint64_t *restrict last, uint8_t *restrict p, uint64_t site, uint64_t addr,
                                 int tag) {
    p = varint(p, site << 2 | (uint64_t)tag);
    p = varint(p, zigzag((int64_t)(addr - last[site])));
    last[site] = addr;
    return p;
}

/* Re-encode the word buffer as varint events (per-site address deltas); returns the byte count.
 * Locals with `restrict` matter: byte stores would otherwise force reloads of every field. */
static size_t encode(const job *j, uint64_t *n_acc, uint64_t *n_sized) {
    uint8_t *restrict p = enc_buf;
    uint64_t *restrict last = last_addr;
    const uint64_t *w = j->words, *stop = j->words + j->n;
    const uint64_t mask = (1ull << ADDR_BITS) - 1;
    uint64_t acc = 0, sized = 0;
    memset(last, 0, (size_t)__pptmc_n_sites * sizeof *last);
    for (; w < stop; w++) {
        uint64_t v = *w, top = v >> ADDR_BITS;
        if (__builtin_expect(top != 0, 1)) {
            int64_t dev = (int64_t)((v & mask) << (64 - ADDR_BITS)) >> (64 - ADDR_BITS);  /* sign-extend */
            p = varint(p, (top - 1) << 2 | TAG_MEM);
            p = varint(p, zigzag(dev));
            acc++;
            continue;
        }
        uint64_t id = v >> 3;
        switch (v & 7) {
        case W_BLOCK: p = varint(p, id << 2 | TAG_BLOCK); break;
        case W_MEMBIG: p = varint(p, id << 2 | TAG_MEM); p = varint(p, zigzag((int64_t)w[1])); w += 1; acc++; break;
        case W_MEMN: p = mem_event(last, p, id, w[1], TAG_MEMN); p = varint(p, w[2]); w += 2; acc++; sized++; break;
        case W_CTRL:
            p = varint(p, id << 2 | TAG_CTRL);
            for (int i = 1; i <= ctrl_args[id]; i++) p = varint(p, w[i]);
            w += ctrl_args[id];
            break;
        default: return (size_t)-1;  /* corrupt event buffer */
        }
    }
    *n_acc = acc;
    *n_sized = sized;
    return (size_t)(p - enc_buf);
}

/* Encode and compress one job into a chunk whose header carries its start state, and append it.
 * Run by the writer thread, or by the emergency path once the writer is stopped; allocates
 * nothing. Returns NULL or what went wrong. */
static const char *write_chunk(const job *j) {
    uint64_t n_acc, n_sized;
    size_t raw = encode(j, &n_acc, &n_sized);
    if (raw == (size_t)-1) return "corrupt event buffer";
    uint8_t *h = comp_buf, *payload = comp_buf + 88;
    size_t clen = ZSTD_compress2(cctx, payload, comp_cap - 88, enc_buf, raw);
    if (ZSTD_isError(clen)) return ZSTD_getErrorName(clen);
    memcpy(h, "PCHK", 4);
    put_u32(h + 4, j->tid);
    put_u64(h + 8, clen);
    put_u64(h + 16, raw);
    put_u64(h + 24, n_acc);
    put_u64(h + 32, (uint64_t)j->region);
    put_u64(h + 40, (uint64_t)j->loop);
    put_u64(h + 48, (uint64_t)j->iter);
    put_u64(h + 56, j->stack_lo);
    put_u64(h + 64, j->stack_hi);
    put_u64(h + 72, j->region_top);
    put_u32(h + 80, crc32_update(0, payload, clen));
    put_u32(h + 84, crc32_update(0, h, 84));
    if (write_all(h, 88 + clen) != 0) return "cannot write the trace file (disk full?)";
    file_crc = crc32_update((uint32_t)file_crc, h, 88 + clen);
    n_chunks++;
    total_acc += n_acc;
    total_sized += n_sized;
    return NULL;
}

static void writer_park(void) {
    for (;;) pause();  /* the crashing thread re-raises its signal and ends the process */
}

/* The writer announces each chunk (writer_writing = 1) before checking rt_state; the emergency
 * path sets rt_state before reading writer_writing. With seq_cst atomics one of them sees the
 * other, so the writer never starts a chunk once the emergency path has begun appending. */
static void *writer_main(void *arg) {
    (void)arg;
    is_writer = 1;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (!queue_head && !writer_stop) pthread_cond_wait(&queue_cond, &lock);
        int done = queue_head == NULL;
        pthread_mutex_unlock(&lock);
        if (done) break;
        __atomic_store_n(&writer_writing, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&rt_state, __ATOMIC_SEQ_CST) == RT_EMERGENCY) {
            __atomic_store_n(&writer_writing, 0, __ATOMIC_SEQ_CST);
            writer_park();
        }
        pthread_mutex_lock(&lock);
        job *j = queue_head;
        queue_head = j->next;
        if (!queue_head) queue_tail = NULL;
        pthread_mutex_unlock(&lock);
        const char *err = write_chunk(j);
        if (err) die(err);
        pthread_mutex_lock(&lock);
        j->owner->busy[j->slot] = 0;
        pthread_cond_broadcast(&free_cond);
        pthread_mutex_unlock(&lock);
        __atomic_store_n(&writer_writing, 0, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* The job describing thread t's current buffer, with the state its chunk starts in. */
static job job_of(tbuf *t) {
    return (job){NULL, t, t->slot, t->words, (size_t)(t->cur - t->words), t->tid, t->c_region, t->c_loop,
                 t->c_iter, t->c_region_top, t->stack_lo, t->stack_hi};
}

/* Hand the full buffer to the writer and continue in the other one (waiting if it is still queued). */
__attribute__((noinline)) static void flush(tbuf *t) {
    if (t->cur == t->words) return;
    int s = t->slot, o = 1 - s;
    job *j = &t->jobs[s];
    *j = job_of(t);
    pthread_mutex_lock(&lock);
    t->busy[s] = 1;
    /* before the append: a handler on this thread then loses this buffer in a two-store window
     * rather than writing it twice (which would corrupt the decoding of every later chunk) */
    __atomic_store_n(&t->in_flush, 1, __ATOMIC_SEQ_CST);
    if (queue_tail) queue_tail->next = j; else queue_head = j;
    queue_tail = j;
    pthread_cond_signal(&queue_cond);
    while (t->busy[o]) pthread_cond_wait(&free_cond, &lock);
    pthread_mutex_unlock(&lock);
    t->slot = o;
    t->words = t->cur = t->bufs[o];
    t->end = t->words + buf_words - SLACK_WORDS;
    t->c_region = t->region;
    t->c_loop = t->loop;
    t->c_iter = t->iter;
    t->c_region_top = t->region_top;
    __atomic_store_n(&t->in_flush, 0, __ATOMIC_SEQ_CST);
}

/* Room for one slow-path event (at most SLACK_WORDS words). */
static inline tbuf *room(void) {
    tbuf *t = tb();
    if (t->cur >= t->end) flush(t);
    return t;
}

/* Edges are counted per static CFG edge: the pass lists each block's predecessors. */
static inline void count_block(tbuf *t, int id, int *prev) {
    t->bcount[id]++;
    int p = *prev;
    *prev = id;
    if (p < 0) return;
    for (int i = __pptmc_pred_off[id]; i < __pptmc_pred_off[id + 1]; i++) {
        if (__pptmc_pred[i] == p) { t->ecount[i]++; return; }
    }
    t->n_other_edges++;
}

__attribute__((always_inline)) void __pptmc_cbb(int id, int *prev) {
    if (counting) count_block(tb(), id, prev);
}

static inline tbuf *trace_block(int id, int *prev) {
    tbuf *t = room();
    count_block(t, id, prev);
    *t->cur++ = (uint64_t)id << 3 | W_BLOCK;
    return t;
}

__attribute__((always_inline)) void __pptmc_bb(int id, int *prev) {
    if (tracing) trace_block(id, prev);
}

/* The block hook of a program that calls libomp's hand-out or team entry points (the pass picks it): the
 * thread's references also count up, its virtual time in the equal-speed turns (pptmc_turns.c). */
__attribute__((always_inline)) void __pptmc_bbt(int id, int *prev) {
    if (tracing) trace_block(id, prev)->refs += (uint64_t)__pptmc_block_sites[id];
}

/* splitmix64's finaliser: a fixed hash, so the sketch (and the estimate) is the same on every run. */
static inline uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Add the line of address `a` to the thread's sketch: register = top SKETCH_BITS bits of the hash, value =
 * 1 + leading zeros of the other bits (at most 64 - SKETCH_BITS + 1). */
static inline void sketch_add(uint8_t *reg, uint64_t a) {
    uint64_t h = mix64(a >> SKETCH_LINE_SHIFT);
    uint8_t rank = (uint8_t)(__builtin_clzll(h << SKETCH_BITS | 1ull << (SKETCH_BITS - 1)) + 1);
    uint8_t *r = reg + (h >> (64 - SKETCH_BITS));
    if (rank > *r) *r = rank;
}

/* A mispredicted access: write the deviation from the prediction. */
static inline void mem_record(tbuf *t, int site, uint64_t dev) {
    if (t->cur >= t->end) flush(t);
    if ((uint64_t)site + 1 < (1ull << (64 - ADDR_BITS)) &&
        (int64_t)(dev << (64 - ADDR_BITS)) >> (64 - ADDR_BITS) == (int64_t)dev) {
        *t->cur++ = ((uint64_t)site + 1) << ADDR_BITS | (dev & ((1ull << ADDR_BITS) - 1));
    } else {
        t->cur[0] = (uint64_t)site << 3 | W_MEMBIG;
        t->cur[1] = dev;
        t->cur += 2;
    }
}

__attribute__((noinline)) static void mem_miss(tbuf *t, int site, uint64_t a) {
    predictor *s = &t->pred[site];
    uint64_t dev = a - (s->last + s->stride);
    s->stride = a - s->last;
    s->last = a;
    mem_record(t, site, dev);
}

/* The hot path: build_instrumented inlines it into the instrumented code (opt -passes=always-inline). */
__attribute__((always_inline)) void __pptmc_mem(int site, const void *p) {
    tbuf *t = tls;
    if (__builtin_expect(t == NULL, 0)) {
        if (!tracing) return;
        t = tb();
    }
    predictor *s = &t->pred[site];
    uint64_t a = (uint64_t)p;
    /* every access's line goes into the sketch, predicted or not; the site's previous line is in already */
    if ((a ^ s->last) >> SKETCH_LINE_SHIFT) sketch_add(t->sketch, a);
    if (__builtin_expect(a == s->last + s->stride, 1)) {
        s->last = a;
        return;
    }
    mem_miss(t, site, a);
}

/* Before a call inside an instrumented block: the block's first k sites have run (keeps order exact). */
void __pptmc_sync(int k) {
    if (!tracing) return;
    tbuf *t = room();
    t->cur[0] = (uint64_t)C_SYNC << 3 | W_CTRL;
    t->cur[1] = (uint64_t)k;
    t->cur += 2;
}

void __pptmc_memn(int site, const void *p, long n) {
    if (!tracing) return;
    tbuf *t = room();
    sketch_add(t->sketch, (uint64_t)p);  /* the row's line, as the analysis takes it: its first byte's */
    t->cur[0] = (uint64_t)site << 3 | W_MEMN;
    t->cur[1] = (uint64_t)p;
    t->cur[2] = (uint64_t)n;
    t->cur += 3;
}

/* One lane of an llvm.masked.* access: recorded like memcpy (always explicit), only when active. */
__attribute__((always_inline)) void __pptmc_lane(int site, const void *p, long n, _Bool active) {
    if (active) __pptmc_memn(site, p, n);
}

static inline void ctrl(tbuf *t, uint64_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
    uint64_t *w = t->cur;
    w[0] = kind << 3 | W_CTRL;
    w[1] = a; w[2] = b; w[3] = c; w[4] = d; w[5] = e;
    t->cur += 1 + ctrl_args[kind];
}

static void open_loop(tbuf *t, int loop_id, long trip_count, int schedule, long chunk);
static void open_barrier(tbuf *t, int region_start);

/* Only the outermost instrumented call on a thread is a region (a parallel-region body). */
void __pptmc_fn_enter(int fn, const void *frame_top) {
    if (!tracing) return;
    tbuf *t = room();
    if (t->depth++ > 0) {
        ctrl(t, C_CALL_ENTER, (uint64_t)fn, 0, 0, 0, 0);
        return;
    }
    t->region = t->region_seq++;
    t->region_top = (uint64_t)frame_top;
    ctrl(t, C_REGION_BEGIN, (uint64_t)fn, (uint64_t)t->region, (uint64_t)frame_top, 0, 0);
    open_barrier(t, 1);  /* the fork: every thread starts the region together */
    __pptmc_turn_region_begin(t->tid, &t->refs);
}

void __pptmc_fn_exit(int fn) {
    if (!tracing) return;
    tbuf *t = room();
    if (--t->depth > 0) {
        ctrl(t, C_CALL_EXIT, (uint64_t)fn, 0, 0, 0, 0);
        return;
    }
    ctrl(t, C_REGION_END, (uint64_t)fn, 0, 0, 0, 0);
    t->region = -1;
    t->region_top = 0;
    __pptmc_turn_region_end();
}

enum { SCHED_BARRIER = 5 };  /* instrument/trace_types.py */

/* A new loop instance: its record in the footer's table, and its loop begin event. */
static void open_loop(tbuf *t, int loop_id, long trip_count, int schedule, long chunk) {
    pthread_mutex_lock(&lock);
    int64_t inst = loop_seq++;
    if (loops_len + 4 > loops_cap) {
        loops_cap = loops_cap ? loops_cap * 2 : 256;
        __atomic_store_n(&loops_moving, 1, __ATOMIC_SEQ_CST);
        loops = realloc(loops, loops_cap * sizeof *loops);
        __atomic_store_n(&loops_moving, 0, __ATOMIC_SEQ_CST);
        if (!loops) die("out of memory");
    }
    loops[loops_len++] = loop_id;
    loops[loops_len++] = trip_count;
    loops[loops_len++] = schedule;
    loops[loops_len++] = chunk;
    pthread_mutex_unlock(&lock);
    t->loop = inst;
    t->iter = -1;
    ctrl(t, C_LOOP_BEGIN, (uint64_t)(int64_t)loop_id, (uint64_t)inst, zigzag(trip_count), (uint64_t)schedule,
         zigzag(chunk));
}

void XOMP_trace_loop_begin(int loop_id, long trip_count, int schedule, long chunk) {
    if (!tracing && !counting) return;
    tbuf *t = tracing ? room() : tb();
    t->l_trip = trip_count;
    t->l_sched = schedule;
    t->l_chunk = chunk;
    if (!tracing) return;
    open_loop(t, loop_id, trip_count, schedule, chunk);
}

/* A barrier, explicit or a construct's implied one, and a region's start are loop records of their own
 * (schedule 5, loop id -1, trip count 1 for a region's start and 0 for a barrier, chunk = the thread's id)
 * that are never ended: the accesses up to the next loop begin carry their instance, so the analysis sees where
 * every thread waits (instrument/FORMAT.md, "Barriers"). The original program's __kmpc_barrier calls get
 * the same record from the instrumentation pass. */
static void open_barrier(tbuf *t, int region_start) {
    open_loop(t, -1, region_start, SCHED_BARRIER, (long)t->tid);
}

void XOMP_trace_barrier(void) {
    if (!tracing) return;
    open_barrier(room(), 0);
}

/* Pieces (PPTMC_PIECE_CORES, a comma list of core counts): a translated loop runs its iterations
 * in pieces and reports each piece's first iteration, so the compiler can vectorise the piece as the
 * native build vectorises a thread's block. A piece ends at the next iteration where some listed core
 * count's schedule starts another core's block, so every piece runs on one core for each listed count.
 * Without the list, every iteration is a piece (exact for any core count, but never vectorised). */
#define MAX_PIECE_CORES 64
void XOMP_trace_iteration(int loop_id, long iteration);
static long piece_cores[MAX_PIECE_CORES];
static int n_piece_cores;

static void read_piece_cores(void) {
    const char *s = getenv("PPTMC_PIECE_CORES");
    n_piece_cores = 0;
    while (s && *s && n_piece_cores < MAX_PIECE_CORES) {
        char *end;
        long p = strtol(s, &end, 10);
        if (end == s || p < 1) die("PPTMC_PIECE_CORES: expected a comma list of core counts (e.g. 1,2,4)");
        piece_cores[n_piece_cores++] = p;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') die("PPTMC_PIECE_CORES: expected a comma list of core counts (e.g. 1,2,4)");
    }
}

/* First iteration after k that starts a core's block under static balanced blocks for p cores
 * (the first trip % p cores get one more iteration; analysis/profiles/private_traces.py), or trip. */
static int64_t next_static_start(int64_t trip, int64_t p, int64_t k) {
    int64_t q = trip / p, r = trip % p;
    int64_t t = k / (q + 1) + 1;  /* the blocks of q + 1 iterations come first */
    if (t <= r) return t * (q + 1);
    if (q == 0) return trip;
    t = (k - r) / q + 1;
    if (t <= r) t = r + 1;
    return t < p ? t * q + r : trip;
}

/* First iteration after k that starts one of libomp's guided chunks for p threads (kmp_sch_guided_iterative_chunked:
 * floor(rest x 0.5 / p) iterations while rest >= 2 p (chunk + 1), then chunk; chunk throughout when
 * (2 chunk + 1) p >= trip), the rule the model deals (analysis/profiles/handouts.py guided_starts), or trip. */
static int64_t next_guided_start(int64_t trip, int64_t p, int64_t chunk, int64_t k) {
    int64_t c = chunk > 0 ? chunk : 1, start = 0;
    if (p <= 1) return trip;
    if ((2 * c + 1) * p >= trip) start = (k / c + 1) * c;
    while (start <= k && start < trip) {
        int64_t rest = trip - start;
        start += rest >= 2 * p * (c + 1) ? (int64_t)((double)rest * (0.5 / (double)p)) : c;
    }
    return start < trip ? start : trip;
}

/* The end of the piece that starts at iteration k of a chunk ending at hi. */
static long piece_end(const tbuf *t, long k, long hi) {
    int cut = t->l_sched == 0 ? t->l_chunk <= 0 : t->l_sched == 2;
    if (!cut) return hi;  /* chunked static and dynamic: a chunk runs on one core, as it is */
    if (n_piece_cores == 0) return k + 1;
    int64_t end = hi;
    for (int j = 0; j < n_piece_cores; j++) {
        int64_t p = piece_cores[j];
        int64_t e = t->l_sched == 0 ? next_static_start(t->l_trip, p, k)
                                    : next_guided_start(t->l_trip, p, t->l_chunk, k);
        if (e < end) end = e;
    }
    return (long)end;
}

long XOMP_trace_piece(int loop_id, long k, long hi) {
    if (!tracing) return counting ? piece_end(tb(), k, hi) : hi;  /* a count run cuts the same pieces */
    XOMP_trace_iteration(loop_id, k);
    return piece_end(room(), k, hi);
}

void XOMP_trace_iteration(int loop_id, long iteration) {
    (void)loop_id;
    if (!tracing) return;
    tbuf *t = room();
    ctrl(t, C_ITER, zigzag((int64_t)iteration - (t->iter + 1)), 0, 0, 0, 0);  /* 0 when consecutive */
    t->iter = iteration;
}

void XOMP_trace_loop_end(int loop_id) {
    if (!tracing) return;
    tbuf *t = room();
    ctrl(t, C_LOOP_END, (uint64_t)loop_id, 0, 0, 0, 0);
    t->loop = -1;
    t->iter = -1;
}

static void copy_header_file(const char *path) {
    /* mmap, not malloc: the header's length varies with the paths it names, and a heap block of that size
     * would shift every later allocation of the program (canonical_addresses) */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t n = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
    if (n <= 0) die("cannot read PPTMC_TRACE_HEADER");
    char *body = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (body == MAP_FAILED) die("cannot read PPTMC_TRACE_HEADER");
    uint8_t h[16];
    memcpy(h, "PPTMCTR\0", 8);
    put_u32(h + 8, FORMAT_VERSION);
    put_u32(h + 12, (uint32_t)n);
    uint8_t hl[4];
    put_u32(hl, (uint32_t)strlen(__pptmc_table_hash));
    uint32_t crc = crc32_update(0, h, 16);  /* the header's own check: a flipped bit is refused, not read */
    crc = crc32_update(crc, (const uint8_t *)body, (size_t)n);
    crc = crc32_update(crc, hl, 4);
    crc = crc32_update(crc, (const uint8_t *)__pptmc_table_hash, strlen(__pptmc_table_hash));
    uint8_t check[4];
    put_u32(check, crc);
    if (write_all(h, 16) || write_all(body, (size_t)n) || write_all(hl, 4) ||
        write_all(__pptmc_table_hash, strlen(__pptmc_table_hash)) || write_all(check, 4))
        die("cannot write the trace file header");
    munmap(body, (size_t)n);
}

/* A small buffered writer on a file descriptor: the footer is also written from signal
 * handlers, where stdio and snprintf are not safe. */
typedef struct { int fd, failed; size_t n, total; uint32_t crc; char buf[8192]; } obuf;
static obuf ob_static;  /* used by one path at a time: the destructor or the emergency flush */

static void ob_flush(obuf *o) {
    for (size_t done = 0; done < o->n && !o->failed;) {
        ssize_t k = write(o->fd, o->buf + done, o->n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) o->failed = 1; else done += (size_t)k;
    }
    o->n = 0;
}

static void ob_put(obuf *o, const char *s, size_t n) {
    while (n) {
        if (o->n == sizeof o->buf) ob_flush(o);
        size_t k = sizeof o->buf - o->n < n ? sizeof o->buf - o->n : n;
        memcpy(o->buf + o->n, s, k);
        o->crc = crc32_update(o->crc, (const uint8_t *)s, k);  /* CRC-32 of everything put since ob_open */
        o->n += k;
        o->total += k;
        s += k;
        n -= k;
    }
}

static void ob_str(obuf *o, const char *s) { ob_put(o, s, strlen(s)); }

static void ob_u64(obuf *o, uint64_t v) {
    char d[24];
    int i = 24;
    do { d[--i] = (char)('0' + v % 10); v /= 10; } while (v);
    ob_put(o, d + i, (size_t)(24 - i));
}

static void ob_i64(obuf *o, int64_t v) {
    if (v < 0) { ob_str(o, "-"); ob_u64(o, -(uint64_t)v); } else ob_u64(o, (uint64_t)v);
}

static obuf *ob_open(int fd) {
    obuf *o = &ob_static;
    o->fd = fd;
    o->failed = 0;
    o->n = o->total = 0;
    o->crc = 0;
    return o;
}

/* Sum every thread's counters and print them as the JSON members "edge_counts", "unlisted_edges"
 * and "block_counts" (the sums go to arrays allocated at start-up). */
static void print_counts(obuf *o) {
    int n_edges = __pptmc_pred_off[__pptmc_n_blocks];
    memset(sum_blocks, 0, ((size_t)__pptmc_n_blocks + 1) * sizeof *sum_blocks);
    memset(sum_edges, 0, ((size_t)n_edges + 1) * sizeof *sum_edges);
    uint64_t other = 0;
    for (tbuf *t = all_threads; t; t = t->next) {
        for (int b = 0; b < __pptmc_n_blocks; b++) sum_blocks[b] += t->bcount[b];
        for (int e = 0; e < n_edges; e++) sum_edges[e] += t->ecount[e];
        other += t->n_other_edges;
    }
    ob_str(o, "\"edge_counts\": [");
    int first = 1;
    for (int b = 0; b < __pptmc_n_blocks; b++) {
        for (int i = __pptmc_pred_off[b]; i < __pptmc_pred_off[b + 1]; i++) {
            if (!sum_edges[i]) continue;
            ob_str(o, first ? "[" : ", [");
            ob_i64(o, __pptmc_pred[i]);
            ob_str(o, ", ");
            ob_i64(o, b);
            ob_str(o, ", ");
            ob_u64(o, sum_edges[i]);
            ob_str(o, "]");
            first = 0;
        }
    }
    ob_str(o, "], \"unlisted_edges\": ");
    ob_u64(o, other);
    ob_str(o, ", \"block_counts\": [");
    for (int b = 0; b < __pptmc_n_blocks; b++) {
        if (b) ob_str(o, ", ");
        ob_u64(o, sum_blocks[b]);
    }
    ob_str(o, "]");
}

/* Print the JSON member "distinct_lines": every thread's sketch merged (register-wise maximum), as hex. */
static void print_sketch(obuf *o) {
    static const char hex[] = "0123456789abcdef";
    ob_str(o, ", \"distinct_lines\": {\"sketch\": \"hll-splitmix64\", \"line_bytes\": ");
    ob_u64(o, 1u << SKETCH_LINE_SHIFT);
    ob_str(o, ", \"bits\": ");
    ob_u64(o, SKETCH_BITS);
    ob_str(o, ", \"registers\": \"");
    for (unsigned i = 0; i < SKETCH_REGS; i++) {  /* merged register by register: no scratch to allocate */
        uint8_t v = 0;
        for (tbuf *t = all_threads; t; t = t->next)
            if (t->sketch && t->sketch[i] > v) v = t->sketch[i];
        char d[2] = {hex[v >> 4], hex[v & 15]};
        ob_put(o, d, 2);
    }
    ob_str(o, "\"}");
}

/* Append the footer and trailer (FORMAT.md). `reason` and `signal` are JSON-safe text or NULL;
 * `status` < 0 and `lost` < 0 are left out. Returns 0, or -1 when a write failed. */
static int append_footer(int complete, const char *reason, const char *sig, int status, int lost) {
    off_t start = lseek(out_fd, 0, SEEK_END);
    if (start < 0) return -1;
    obuf *o = ob_open(out_fd);
    uint8_t h[8];
    memcpy(h, "PFTR", 4);
    put_u32(h + 4, 0);  /* the length is patched in below */
    ob_put(o, (const char *)h, 8);
    o->crc = 0;  /* the footer's check covers its JSON */
    ob_str(o, complete ? "{\"complete\": true, \"n_chunks\": " : "{\"complete\": false, \"n_chunks\": ");
    ob_u64(o, n_chunks);
    ob_str(o, ", \"n_events\": ");
    ob_u64(o, total_acc);
    ob_str(o, ", \"n_sized\": ");
    ob_u64(o, total_sized);
    ob_str(o, ", \"n_threads\": ");
    ob_u64(o, next_tid);
    ob_str(o, ", \"crc32\": ");
    ob_u64(o, file_crc);
    ob_str(o, ", \"table_hash\": \"");
    ob_str(o, __pptmc_table_hash);
    ob_str(o, "\", ");
    print_counts(o);
    print_sketch(o);
    if (!__atomic_load_n(&loops_moving, __ATOMIC_SEQ_CST)) {  /* else the reader rebuilds them from the chunks */
        ob_str(o, ", \"loops\": [");
        for (size_t i = 0; i < loops_len; i += 4) {
            ob_str(o, i ? ", [" : "[");
            for (int k = 0; k < 4; k++) {
                if (k) ob_str(o, ", ");
                ob_i64(o, loops[i + (size_t)k]);
            }
            ob_str(o, "]");
        }
        ob_str(o, "]");
    }
    if (reason) { ob_str(o, ", \"reason\": \""); ob_str(o, reason); ob_str(o, "\""); }
    if (sig) { ob_str(o, ", \"signal\": \""); ob_str(o, sig); ob_str(o, "\""); }
    if (status >= 0) { ob_str(o, ", \"exit_status\": "); ob_i64(o, status); }
    if (lost >= 0) { ob_str(o, ", \"lost_threads\": "); ob_i64(o, lost); }
    ob_str(o, "}");
    uint32_t json_len = (uint32_t)(o->total - 8);
    uint8_t check[4];
    put_u32(check, o->crc);
    ob_put(o, (const char *)check, 4);
    ob_flush(o);
    uint8_t len[4], tail[16];
    put_u32(len, json_len);
    put_u64(tail, (uint64_t)start);
    memcpy(tail + 8, "PPTMCEND", 8);
    if (o->failed || pwrite(out_fd, len, 4, start + 4) != 4 || write_all(tail, 16)) return -1;
    return 0;
}

static void write_footer(void) {
    for (tbuf *t = all_threads; t; t = t->next) flush(t);
    pthread_mutex_lock(&lock);
    writer_stop = 1;
    pthread_cond_signal(&queue_cond);
    pthread_mutex_unlock(&lock);
    pthread_join(writer_thread, NULL);
    int st = exit_status;  /* from on_exit; -1 when the program ended without calling exit() */
    int bad = st > 0 ? append_footer(0, NULL, NULL, st, -1)
                     : append_footer(1, NULL, NULL, -1, -1);
    if (bad || close(out_fd) != 0) die("cannot write the trace footer (disk full?)");
    out_fd = -1;
}

static void write_counts(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("cannot open PPTMC_COUNTS_OUT");
    obuf *o = ob_open(fd);
    ob_str(o, "{\"table_hash\": \"");
    ob_str(o, __pptmc_table_hash);
    ob_str(o, "\", \"n_threads\": ");
    ob_u64(o, next_tid);
    ob_str(o, ", ");
    print_counts(o);
    ob_str(o, "}\n");
    ob_flush(o);
    if (o->failed || close(fd) != 0) die("cannot write PPTMC_COUNTS_OUT");
}

/* ---- crashes, _exit and fork ---- */

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static char *cat(char *p, char *end, const char *s) {
    while (*s && p < end - 1) *p++ = *s++;
    *p = 0;
    return p;
}

static char *cat_u64(char *p, char *end, uint64_t v) {
    char d[24];
    int i = 23;
    d[23] = 0;
    do { d[--i] = (char)('0' + v % 10); v /= 10; } while (v);
    return cat(p, end, d + i);
}

/* Say on stderr why the emergency flush stopped; the trace then ends at its last intact chunk. */
static int give_up(const char *what, const char *why) {
    say("pptmc runtime: could not flush the trace after ", what);
    say("pptmc runtime: because ", why);
    return 0;
}

/* Best effort after a fatal signal or `_exit`, async-signal-safe: stop the writer between two
 * chunks, append every queued buffer and the calling thread's own buffer, then a footer.
 * Returns 1 when the footer was written, 0 when nothing more could be saved, -1 when another
 * thread is already doing this. `what` names the event (a signal name, or "_exit(3)"). */
static int emergency_flush(const char *what, const char *sig, int status) {
    int expect = RT_RUNNING;
    if (!__atomic_compare_exchange_n(&rt_state, &expect, RT_EMERGENCY, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return expect == RT_EMERGENCY ? -1 : 0;
    if (is_writer) return give_up(what, "it happened on the writer thread");  /* the file may end mid-chunk */
    for (int i = 0; __atomic_load_n(&writer_writing, __ATOMIC_SEQ_CST); i++) {
        if (i >= 10000) return give_up(what, "the writer thread is stuck");  /* leave the file as it is */
        nap_ms(1);
    }
    /* The lock is kept to the end: threads reaching the runtime's slow path now wait instead of
     * queueing more. */
    int locked = pthread_mutex_trylock(&lock) == 0;
    /* The signal may have interrupted this thread inside its own critical section (typically
     * waiting in flush() for the writer): the queue is consistent there, so take the lock over. */
    if (!locked && pthread_mutex_unlock(&lock) == 0) locked = pthread_mutex_trylock(&lock) == 0;
    for (int i = 0; i < 1000 && !locked; i++) {
        nap_ms(1);
        locked = pthread_mutex_trylock(&lock) == 0;
    }
    if (!locked) return give_up(what, "the runtime's lock stayed busy");
    const char *err = NULL;
    for (job *j = queue_head; j && !err; j = j->next) err = write_chunk(j);
    tbuf *me = tls;
    if (!err && me && !__atomic_load_n(&me->in_flush, __ATOMIC_SEQ_CST) && me->cur != me->words) {
        job j = job_of(me);
        err = write_chunk(&j);
    }
    if (err) return give_up(what, err);
    int lost = 0;
    for (tbuf *t = all_threads; t; t = t->next)
        if (t != me && t->cur != t->words) lost++;
    /* a plain _exit(0) outside any region with nothing left in other threads loses nothing */
    int complete = !sig && status == 0 && lost == 0 && (!me || me->depth == 0);
    static char reason[320];
    char *p = reason, *end = reason + sizeof reason;
    p = cat(p, end, what);
    if (me) { p = cat(p, end, " in traced thread "); p = cat_u64(p, end, me->tid); }
    else p = cat(p, end, " in an untraced thread");
    p = cat(p, end, ": the runtime wrote every queued buffer and this thread's events; ");
    p = cat_u64(p, end, (uint64_t)lost);
    cat(p, end, " other thread(s) had events still in memory, which are lost");
    if (append_footer(complete, complete ? NULL : reason, sig, status, lost) != 0)
        return give_up(what, "the footer could not be written");
    return 1;
}

static const struct { int sig; const char *name; } fatal_signals[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"}, {SIGABRT, "SIGABRT"},
    {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGHUP, "SIGHUP"}};
#define N_FATAL ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))

/* Save what can be saved, then die of the same signal (the exit status stays the signal's). */
static void on_fatal(int sig, siginfo_t *si, void *uc) {
    (void)si; (void)uc;
    const char *name = "signal";
    for (int i = 0; i < N_FATAL; i++)
        if (fatal_signals[i].sig == sig) name = fatal_signals[i].name;
    int r = emergency_flush(name, name, -1);
    if (r > 0) say("pptmc runtime: the trace was flushed and marked incomplete after ", name);
    for (int i = 0; r < 0 && i < 30000 && __atomic_load_n(&rt_state, __ATOMIC_SEQ_CST) == RT_EMERGENCY; i++)
        nap_ms(1);  /* another thread is flushing; it ends the process when done */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);  /* a fault re-executes its instruction on return anyway, now with the default action */
}

/* Install the handler only where the disposition is still the default (nohup's SIG_IGN stays). */
static void install_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_FATAL; i++) sigaddset(&sa.sa_mask, fatal_signals[i].sig);
    for (int i = 0; i < N_FATAL; i++) {
        struct sigaction old;
        if (sigaction(fatal_signals[i].sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(fatal_signals[i].sig, &sa, NULL);
    }
}

/* `_exit` skips exit handlers and destructors; the runtime interposes it (the program's calls
 * bind to this definition) to flush first. libc's own exit() reaches the kernel without it. */
void _exit(int status) {
    if (__atomic_load_n(&rt_state, __ATOMIC_SEQ_CST) == RT_RUNNING) {
        char what[40], *p = what;
        p = cat(p, what + sizeof what, "_exit(");
        p = cat_u64(p, what + sizeof what, (uint64_t)(status & 0xff));
        cat(p, what + sizeof what, ")");
        emergency_flush(what, NULL, status & 0xff);
    }
    exit_group(status);
}

void _Exit(int status) __attribute__((alias("_exit")));

static void record_exit(int status, void *arg) {
    (void)arg;
    exit_status = status & 0xff;
}

/* A forked child must not write into the parent's trace (it shares the file descriptor). */
static void in_child(void) {
    tracing = counting = 0;
    tls = NULL;
    __atomic_store_n(&rt_state, RT_OFF, __ATOMIC_SEQ_CST);
    out_fd = -1;
}

static void start_writer(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);  /* process-directed signals go to a traced thread */
    int bad = pthread_create(&writer_thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (bad) die("cannot start the writer thread");
}

static void start_tracing(const char *trace_out) {
    const char *hdr = getenv("PPTMC_TRACE_HEADER");
    out_fd = open(trace_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0 || !hdr) die("cannot open PPTMC_TRACE_OUT (and PPTMC_TRACE_HEADER must be set)");
    copy_header_file(hdr);  /* written at once: a crash still leaves a readable header */
    map_sketch_pool();
    const char *cb = getenv("PPTMC_CHUNK_BYTES");
    if (cb && atol(cb) >= 4096) buf_words = (size_t)atol(cb) / 8;
    enc_buf = calloc(buf_words, 16);
    last_addr = calloc((size_t)__pptmc_n_sites + 1, sizeof *last_addr);
    comp_cap = ZSTD_compressBound(buf_words * 16) + 88;
    comp_buf = malloc(comp_cap);
    size_t ws_size = ZSTD_estimateCCtxSize(1);
    void *ws = malloc(ws_size);
    cctx = ws ? ZSTD_initStaticCCtx(ws, ws_size) : NULL;
    if (!enc_buf || !last_addr || !comp_buf || !cctx) die("out of memory");
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    start_writer();
    tracing = 1;
    on_exit(record_exit, NULL);
    install_handlers();
    __atomic_store_n(&rt_state, RT_RUNNING, __ATOMIC_SEQ_CST);
}

/* Deterministic addresses (PPTMC_STACK_PAD set, as the tracer does): the same program and inputs give
 * the same trace wherever and however often it runs. Two things vary otherwise: address-space
 * randomisation (heap, mmap and stack bases; the stack also by a random offset within its page), and
 * the bytes of the environment and argument strings the kernel copies above the stack (the trace's
 * own output paths among them), which shift every stack address. So the process re-executes itself
 * once with randomisation off (personality(2); it survives execve), then once more with
 * PPTMC_STACK_PAD lengthened by exactly the bytes that bring argv to STACK_TARGET modulo a page: the
 * strings grow by a multiple of 16, so argv and every frame below it move down by that much. Where
 * randomisation cannot be switched off, nothing is changed (a re-executed stack would be re-randomised).
 * PPTMC_STACK_PAD: "0" = not yet aligned, "1" + padding = aligned. Why not in the decoder: stack
 * addresses carry no mark there, and the heap and mmap bases would still move. */
#define STACK_TARGET 0x808u  /* argv = the initial stack pointer + 8 */
#define PAGE_BYTES 4096u

static void reexec(char **argv, char **envp) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return;
    self[n] = '\0';
    execve(self, argv, envp);  /* returns only on failure: then run as is */
}

static void canonical_addresses(char **argv, char **envp) {
    const char *pad = getenv("PPTMC_STACK_PAD");
    if (!pad || pad[0] != '0' || !argv || !envp) return;
    int persona = personality(0xffffffff);
    if (persona == -1) return;
    if (!(persona & ADDR_NO_RANDOMIZE)) {
        if (personality((unsigned long)persona | ADDR_NO_RANDOMIZE) == -1) return;
        reexec(argv, envp);
        return;
    }
    /* The anchor is argv, just above the initial stack pointer: every frame from there to main's is
     * libc's, so main's stack does not move when this runtime's own frames change size. */
    uintptr_t here = (uintptr_t)argv;
    size_t delta = (here - STACK_TARGET) & (PAGE_BYTES - 1);  /* a multiple of 16 */
    size_t n_env = 0;
    while (envp[n_env]) n_env++;
    char **env = calloc(n_env + 1, sizeof *env);
    char *mine = malloc(strlen("PPTMC_STACK_PAD=1") + delta + 1);
    if (!env || !mine) return;
    strcpy(mine, "PPTMC_STACK_PAD=1");
    memset(mine + strlen(mine), 'x', delta);
    mine[strlen("PPTMC_STACK_PAD=1") + delta] = '\0';
    for (size_t i = 0; i < n_env; i++)
        env[i] = strncmp(envp[i], "PPTMC_STACK_PAD=", 16) == 0 ? mine : envp[i];
    reexec(argv, env);
}

__attribute__((constructor)) static void pptmc_start(int argc, char **argv, char **envp) {
    (void)argc;
    canonical_addresses(argv, envp);
    crc_init();
    const char *trace_out = getenv("PPTMC_TRACE_OUT");
    const char *count_out = getenv("PPTMC_COUNTS_OUT");
    counting = count_out && *count_out;
    int trace = trace_out && *trace_out;
    if (trace || counting) {
        sum_blocks = calloc((size_t)__pptmc_n_blocks + 1, sizeof *sum_blocks);
        sum_edges = calloc((size_t)__pptmc_pred_off[__pptmc_n_blocks] + 1, sizeof *sum_edges);
        if (!sum_blocks || !sum_edges) die("out of memory");
        pthread_atfork(NULL, NULL, in_child);
    }
    if (trace || counting) read_piece_cores();
    if (trace) start_tracing(trace_out);
    /* Counting runs take the marker branches too, so their block counts equal a traced run's. */
    if ((tracing || counting) && &xomp_trace_enabled) xomp_trace_enabled = 1;
    if (tracing || counting) tb();  /* the main thread is thread 0 */
}

__attribute__((destructor)) static void pptmc_finish(void) {
    pthread_mutex_lock(&lock);
    int t = tracing, c = counting;
    tracing = counting = 0;  /* late events from other threads are dropped, not half-written */
    pthread_mutex_unlock(&lock);
    int expect = RT_RUNNING;
    if (t && __atomic_compare_exchange_n(&rt_state, &expect, RT_FINISHING, 0, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST)) {
        write_footer();
        __atomic_store_n(&rt_state, RT_OFF, __ATOMIC_SEQ_CST);
    }
    if (c) write_counts(getenv("PPTMC_COUNTS_OUT"));
}
