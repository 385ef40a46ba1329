/* pptmc trace runtime: records the events the instrumentation pass inserts (see instrument/FORMAT.md).
 *
 * Trace mode (PPTMC_TRACE_OUT set): each thread appends 8-byte event words (block entries, control
 * events, and only those accesses its per-site stride predictors miss) to a buffer; a writer thread
 * re-encodes full buffers as varint events, compresses them with zstd and appends them as chunks;
 * a footer with block/edge counts and loop instances is written at exit.
 * Count mode (PPTMC_COUNTS_OUT set): only block and edge counters, written as JSON at exit.
 * Nothing here is called by the program itself except the XOMP_trace_* loop hooks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

extern const char __pptmc_table_hash[];
extern const int __pptmc_n_sites;
extern const int __pptmc_n_blocks;
extern const int __pptmc_pred_off[];  /* block b's predecessors: __pptmc_pred[off[b] .. off[b+1]) */
extern const int __pptmc_pred[];
extern int xomp_trace_enabled __attribute__((weak));

#define FORMAT_VERSION 1
#define BUF_WORDS (1u << 19)   /* 4 MiB of 8-byte words per thread before a chunk is cut */
#define SLACK_WORDS 8u         /* the longest slow-path event */
#define ADDR_BITS 48           /* user-space addresses on x86-64/aarch64 fit in 48 bits */

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
    struct tbuf *next;
    uint64_t *words;           /* the buffer being filled: bufs[slot] */
    uint64_t *bufs[2];         /* double buffering: the writer thread drains one while the other fills */
    int slot, busy[2];
    struct job *jobs;
    uint64_t *bcount;          /* per-block entry counts */
    uint64_t *ecount;          /* per static CFG edge counts (index into __pptmc_pred) */
    uint64_t n_other_edges;    /* dynamic edges missing from the static CFG (should stay 0) */
    uint32_t tid;
    int depth;                 /* nesting of instrumented functions on this thread */
    int64_t region, loop, iter, region_seq;
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
static tbuf *all_threads;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int tracing, counting;
static size_t buf_words = BUF_WORDS;  /* PPTMC_CHUNK_BYTES overrides it (tests use small chunks) */
static uint32_t next_tid;
static uint64_t n_chunks, total_acc, file_crc;
static int64_t loop_seq;
static int64_t *loops;        /* instance records: loop_id, trip, schedule, chunk */
static size_t loops_len, loops_cap;

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

static void die(const char *what) {
    fprintf(stderr, "pptmc runtime: %s\n", what);
    _exit(86);
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
    pthread_mutex_lock(&lock);
    t->tid = next_tid++;
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

static void write_all(const void *p, size_t n) {
    if (fwrite(p, 1, n, out) != n) die("cannot write the trace file (disk full?)");
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
static size_t encode(const job *j, uint64_t *n_acc) {
    uint8_t *restrict p = enc_buf;
    uint64_t *restrict last = last_addr;
    const uint64_t *w = j->words, *stop = j->words + j->n;
    const uint64_t mask = (1ull << ADDR_BITS) - 1;
    uint64_t acc = 0;
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
        case W_MEMN: p = mem_event(last, p, id, w[1], TAG_MEMN); p = varint(p, w[2]); w += 2; acc++; break;
        case W_CTRL:
            p = varint(p, id << 2 | TAG_CTRL);
            for (int i = 1; i <= ctrl_args[id]; i++) p = varint(p, w[i]);
            w += ctrl_args[id];
            break;
        default: die("corrupt event buffer");
        }
    }
    *n_acc = acc;
    return (size_t)(p - enc_buf);
}

/* Writer thread: encode and compress one job into a chunk whose header carries its start state. */
static void write_chunk(const job *j) {
    uint64_t n_acc;
    size_t raw = encode(j, &n_acc);
    size_t bound = ZSTD_compressBound(raw);
    uint8_t *comp = malloc(bound + 88);
    if (!comp) die("out of memory");
    uint8_t *h = comp, *payload = comp + 88;
    size_t clen = ZSTD_compress2(cctx, payload, bound, enc_buf, raw);
    if (ZSTD_isError(clen)) die(ZSTD_getErrorName(clen));
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
    write_all(h, 88 + clen);
    file_crc = crc32_update((uint32_t)file_crc, h, 88 + clen);
    n_chunks++;
    total_acc += n_acc;
    free(comp);
}

static void *writer_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!queue_head && !writer_stop) pthread_cond_wait(&queue_cond, &lock);
        if (!queue_head) break;
        job *j = queue_head;
        queue_head = j->next;
        if (!queue_head) queue_tail = NULL;
        pthread_mutex_unlock(&lock);
        write_chunk(j);
        pthread_mutex_lock(&lock);
        j->owner->busy[j->slot] = 0;
        pthread_cond_broadcast(&free_cond);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Hand the full buffer to the writer and continue in the other one (waiting if it is still queued). */
__attribute__((noinline)) static void flush(tbuf *t) {
    if (t->cur == t->words) return;
    int s = t->slot, o = 1 - s;
    job *j = &t->jobs[s];
    *j = (job){NULL, t, s, t->words, (size_t)(t->cur - t->words), t->tid, t->c_region, t->c_loop, t->c_iter,
               t->c_region_top, t->stack_lo, t->stack_hi};
    pthread_mutex_lock(&lock);
    t->busy[s] = 1;
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

__attribute__((always_inline)) void __pptmc_bb(int id, int *prev) {
    if (!tracing) return;
    tbuf *t = room();
    count_block(t, id, prev);
    *t->cur++ = (uint64_t)id << 3 | W_BLOCK;
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
    t->cur[0] = (uint64_t)site << 3 | W_MEMN;
    t->cur[1] = (uint64_t)p;
    t->cur[2] = (uint64_t)n;
    t->cur += 3;
}

static inline void ctrl(tbuf *t, uint64_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
    uint64_t *w = t->cur;
    w[0] = kind << 3 | W_CTRL;
    w[1] = a; w[2] = b; w[3] = c; w[4] = d; w[5] = e;
    t->cur += 1 + ctrl_args[kind];
}

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
}

void XOMP_trace_loop_begin(int loop_id, long trip_count, int schedule, long chunk) {
    if (!tracing) return;
    tbuf *t = room();
    pthread_mutex_lock(&lock);
    int64_t inst = loop_seq++;
    if (loops_len + 4 > loops_cap) {
        loops_cap = loops_cap ? loops_cap * 2 : 256;
        loops = realloc(loops, loops_cap * sizeof *loops);
        if (!loops) die("out of memory");
    }
    loops[loops_len++] = loop_id;
    loops[loops_len++] = trip_count;
    loops[loops_len++] = schedule;
    loops[loops_len++] = chunk;
    pthread_mutex_unlock(&lock);
    t->loop = inst;
    t->iter = -1;
    ctrl(t, C_LOOP_BEGIN, (uint64_t)loop_id, (uint64_t)inst, zigzag(trip_count), (uint64_t)schedule,
         zigzag(chunk));
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
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read PPTMC_TRACE_HEADER");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *body = malloc((size_t)n + 1);
    if (!body || fread(body, 1, (size_t)n, f) != (size_t)n) die("cannot read PPTMC_TRACE_HEADER");
    fclose(f);
    uint8_t h[16];
    memcpy(h, "PPTMCTR\0", 8);
    put_u32(h + 8, FORMAT_VERSION);
    put_u32(h + 12, (uint32_t)n);
    write_all(h, 16);
    write_all(body, (size_t)n);
    uint32_t hl = (uint32_t)strlen(__pptmc_table_hash);
    write_all(&hl, 4);
    write_all(__pptmc_table_hash, hl);
    free(body);
}

__attribute__((constructor)) static void pptmc_start(void) {
    crc_init();
    const char *trace_out = getenv("PPTMC_TRACE_OUT");
    const char *count_out = getenv("PPTMC_COUNTS_OUT");
    if (trace_out && *trace_out) {
        const char *hdr = getenv("PPTMC_TRACE_HEADER");
        out = fopen(trace_out, "wb");
        if (!out || !hdr) die("cannot open PPTMC_TRACE_OUT (and PPTMC_TRACE_HEADER must be set)");
        setvbuf(out, NULL, _IOFBF, 1 << 20);
        copy_header_file(hdr);
        fflush(out);  /* a crash must still leave a readable header */
        const char *cb = getenv("PPTMC_CHUNK_BYTES");
        if (cb && atol(cb) >= 4096) buf_words = (size_t)atol(cb) / 8;
        enc_buf = calloc(buf_words, 16);
        last_addr = calloc((size_t)__pptmc_n_sites + 1, sizeof *last_addr);
        cctx = ZSTD_createCCtx();
        if (!enc_buf || !last_addr || !cctx) die("out of memory");
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
        if (pthread_create(&writer_thread, NULL, writer_main, NULL) != 0) die("cannot start the writer thread");
        tracing = 1;
    }
    counting = count_out && *count_out;
    if (tracing && &xomp_trace_enabled) xomp_trace_enabled = 1;
    if (tracing || counting) tb();  /* the main thread is thread 0 */
}

/* Sum every thread's counters and print them as the JSON members "block_counts" and "edge_counts". */
static void print_counts(FILE *f) {
    uint64_t *sum = calloc((size_t)__pptmc_n_blocks + 1, sizeof *sum);
    int n_edges = __pptmc_pred_off[__pptmc_n_blocks];
    uint64_t *esum = calloc((size_t)n_edges + 1, sizeof *esum);
    uint64_t other = 0;
    for (tbuf *t = all_threads; t; t = t->next) {
        for (int b = 0; b < __pptmc_n_blocks; b++) sum[b] += t->bcount[b];
        for (int e = 0; e < n_edges; e++) esum[e] += t->ecount[e];
        other += t->n_other_edges;
    }
    fprintf(f, "\"edge_counts\": [");
    int first = 1;
    for (int b = 0; b < __pptmc_n_blocks; b++) {
        for (int i = __pptmc_pred_off[b]; i < __pptmc_pred_off[b + 1]; i++) {
            if (!esum[i]) continue;
            fprintf(f, "%s[%d, %d, %llu]", first ? "" : ", ", __pptmc_pred[i], b, (unsigned long long)esum[i]);
            first = 0;
        }
    }
    fprintf(f, "], \"unlisted_edges\": %llu, \"block_counts\": [", (unsigned long long)other);
    for (int b = 0; b < __pptmc_n_blocks; b++)
        fprintf(f, "%s%llu", b ? ", " : "", (unsigned long long)sum[b]);
    fprintf(f, "]");
    free(sum);
    free(esum);
}

static void write_footer(void) {
    for (tbuf *t = all_threads; t; t = t->next) flush(t);
    pthread_mutex_lock(&lock);
    writer_stop = 1;
    pthread_cond_signal(&queue_cond);
    pthread_mutex_unlock(&lock);
    pthread_join(writer_thread, NULL);
    long start = ftell(out);
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    fprintf(mem, "{\"complete\": true, \"n_chunks\": %llu, \"n_events\": %llu, \"n_threads\": %u, "
            "\"crc32\": %llu, \"table_hash\": \"%s\", ", (unsigned long long)n_chunks,
            (unsigned long long)total_acc, next_tid, (unsigned long long)file_crc, __pptmc_table_hash);
    print_counts(mem);
    fprintf(mem, ", \"loops\": [");
    for (size_t i = 0; i < loops_len; i += 4)
        fprintf(mem, "%s[%lld, %lld, %lld, %lld]", i ? ", " : "", (long long)loops[i], (long long)loops[i + 1],
                (long long)loops[i + 2], (long long)loops[i + 3]);
    fprintf(mem, "]}");
    fclose(mem);
    uint8_t h[8];
    memcpy(h, "PFTR", 4);
    put_u32(h + 4, (uint32_t)len);
    write_all(h, 8);
    write_all(json, len);
    uint8_t tail[16];
    put_u64(tail, (uint64_t)start);
    memcpy(tail + 8, "PPTMCEND", 8);
    write_all(tail, 16);
    free(json);
    if (fclose(out) != 0) die("cannot close the trace file (disk full?)");
    out = NULL;
}

static void write_counts(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) die("cannot open PPTMC_COUNTS_OUT");
    fprintf(f, "{\"table_hash\": \"%s\", \"n_threads\": %u, ", __pptmc_table_hash, next_tid);
    print_counts(f);
    fprintf(f, "}\n");
    if (fclose(f) != 0) die("cannot write PPTMC_COUNTS_OUT");
}

__attribute__((destructor)) static void pptmc_finish(void) {
    pthread_mutex_lock(&lock);
    int t = tracing, c = counting;
    tracing = counting = 0;  /* late events from other threads are dropped, not half-written */
    pthread_mutex_unlock(&lock);
    if (t) write_footer();
    if (c) write_counts(getenv("PPTMC_COUNTS_OUT"));
}
