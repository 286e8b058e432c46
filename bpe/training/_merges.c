/* The merge loop in C, for speed; bpe/training/merge_loop.py is its readable twin,
 * which it equals merge for merge (tests/test_merge_loop.py).
 *
 * The state is the same as the Python loop's:
 *   - words: token IDs per word (uint32), each with its count;
 *   - pairs: (left, right) -> count and the words it occurs in, in an
 *     open-addressing hash table; only pairs that reach min_frequency live;
 *   - a max-heap of the live pairs, indexed (each pair knows its slot), so a
 *     count that falls moves its pair down at once and the top is always the
 *     best live pair;
 *   - the bytes of every token and a set of them (the duplicate-bytes rule).
 *
 * Order: the higher count wins; a tie goes to the greater (left bytes, right
 * bytes), or with tie-break ranks given (HF's order) to the smaller
 * (rank[left], rank[right]).
 *
 * Parity-aware training (``sources`` given; bpe/training/parity_loop.py is its
 * readable twin): every word has a source, every pair a count per source, and
 * each source has its own indexed heap, ordered by the pair's count in that
 * source, then its total, then the tie-break. Before each merge the source with
 * the fewest bytes per token (its tokens fall at every merge site in its words)
 * and a non-empty heap picks its top pair. A pair sits in a source's heap while
 * its count there reaches min_frequency, and is forgotten when it is in none.
 *
 * Pair counts are 128-bit: the caller checks that no count can exceed that.
 * ``MergeLoop.learn`` returns to Python every few merges, so Python handles
 * signals, progress and checkpoints; merges are appended to the caller's list
 * one by one, each complete before the next is chosen.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef __SIZEOF_INT128__
#error "the merge loop needs a compiler with 128-bit integers"
#endif

typedef __int128 count_t;

typedef struct {
    count_t count;
    uint32_t left, right;
    uint32_t *words; /* indices of words holding the pair, each once, ascending per merge */
    uint32_t nwords, capwords;
    int32_t heap_pos; /* slot in the heap, -1 when not in it */
} PairRec;

typedef struct {
    int32_t *items; /* pair indices */
    size_t len, cap;
} Heap;

typedef struct {
    PyObject_HEAD
    /* words */
    uint32_t *symbols;   /* all words' IDs, word i at symbols[start[i]], length len[i] */
    uint64_t *start;
    uint32_t *len;
    uint64_t *wcount;
    size_t nwords;
    /* pairs */
    PairRec *pairs;
    size_t npairs_alloc, npairs_cap;
    int32_t *free_pairs;
    size_t nfree, free_cap;
    int32_t *table; /* hash slots: pair index or -1 */
    size_t table_mask, table_used;
    /* heap of pair indices (plain training) */
    Heap heap;
    /* parity-aware training: nsources > 0 */
    size_t nsources;
    uint32_t *wsource;           /* the source of each word */
    count_t *sbytes, *stokens;   /* per source: its bytes, its tokens now */
    count_t *scount;             /* per pair and source: pair p's count in source t at p * nsources + t */
    int32_t *spos;               /* per pair and source: its slot in that source's heap, -1 when not in it */
    size_t scount_cap, spos_cap;
    Heap *sheaps;                /* one heap per source */
    /* tokens */
    unsigned char *tok_bytes;
    size_t tok_bytes_len, tok_bytes_cap;
    uint64_t *tok_off;
    uint32_t *tok_len;
    uint32_t *rank; /* tie-break rank per token, NULL for the byte order */
    size_t ntokens, tok_cap;
    int32_t *spelled; /* hash set of token IDs by their bytes, -1 empty */
    size_t spelled_mask, spelled_used;
    count_t min_frequency;
    /* scratch */
    int32_t *created;
    size_t ncreated, created_cap;
    uint32_t *sites;
    size_t sites_cap;
} MergeLoop;

/* --- small growable arrays ------------------------------------------------ */

static int grow(void **array, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*array, cap2 * item);
    if (!p) { PyErr_NoMemory(); return -1; }
    *array = p;
    *cap = cap2;
    return 0;
}

/* --- the pair hash table -------------------------------------------------- */

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t pair_hash(uint32_t left, uint32_t right) {
    return mix(((uint64_t)left << 32) | right);
}

static int32_t find_pair(MergeLoop *s, uint32_t left, uint32_t right) {
    size_t i = pair_hash(left, right) & s->table_mask;
    for (;;) {
        int32_t p = s->table[i];
        if (p < 0) return -1;
        if (s->pairs[p].left == left && s->pairs[p].right == right) return p;
        i = (i + 1) & s->table_mask;
    }
}

static int table_resize(MergeLoop *s, size_t slots) {
    int32_t *old = s->table;
    size_t old_slots = old ? s->table_mask + 1 : 0;
    int32_t *table = malloc(slots * sizeof(int32_t));
    if (!table) { PyErr_NoMemory(); return -1; }
    memset(table, 0xff, slots * sizeof(int32_t));
    s->table = table;
    s->table_mask = slots - 1;
    for (size_t i = 0; i < old_slots; i++) {
        int32_t p = old[i];
        if (p < 0) continue;
        size_t j = pair_hash(s->pairs[p].left, s->pairs[p].right) & s->table_mask;
        while (table[j] >= 0) j = (j + 1) & s->table_mask;
        table[j] = p;
    }
    free(old);
    return 0;
}

/* A new pair with one word; not yet in the heap. Returns its index or -1. */
static int32_t add_pair(MergeLoop *s, uint32_t left, uint32_t right, count_t count, uint32_t word) {
    if (2 * (s->table_used + 1) > s->table_mask + 1) {
        if (table_resize(s, 2 * (s->table_mask + 1)) < 0) return -1;
    }
    int32_t p;
    if (s->nfree) {
        p = s->free_pairs[--s->nfree];
    } else {
        if (s->npairs_alloc >= INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many pairs"); return -1; }
        if (grow((void **)&s->pairs, &s->npairs_cap, s->npairs_alloc + 1, sizeof(PairRec)) < 0) return -1;
        if (s->nsources) {
            size_t need = (s->npairs_alloc + 1) * s->nsources;
            if (grow((void **)&s->scount, &s->scount_cap, need, sizeof(count_t)) < 0) return -1;
            if (grow((void **)&s->spos, &s->spos_cap, need, sizeof(int32_t)) < 0) return -1;
        }
        p = (int32_t)s->npairs_alloc++;
    }
    if (s->nsources) {
        memset(s->scount + (size_t)p * s->nsources, 0, s->nsources * sizeof(count_t));
        memset(s->spos + (size_t)p * s->nsources, 0xff, s->nsources * sizeof(int32_t));
    }
    PairRec *r = &s->pairs[p];
    r->count = count;
    r->left = left;
    r->right = right;
    r->words = malloc(2 * sizeof(uint32_t));
    if (!r->words) { PyErr_NoMemory(); return -1; }
    r->words[0] = word;
    r->nwords = 1;
    r->capwords = 2;
    r->heap_pos = -1;
    size_t i = pair_hash(left, right) & s->table_mask;
    while (s->table[i] >= 0) i = (i + 1) & s->table_mask;
    s->table[i] = p;
    s->table_used++;
    return p;
}

static int add_word(PairRec *r, uint32_t word) {
    if (r->words[r->nwords - 1] == word) return 0;
    if (r->nwords == r->capwords) {
        uint32_t cap = r->capwords * 2;
        uint32_t *w = realloc(r->words, (size_t)cap * sizeof(uint32_t));
        if (!w) { PyErr_NoMemory(); return -1; }
        r->words = w;
        r->capwords = cap;
    }
    r->words[r->nwords++] = word;
    return 0;
}

/* Removes pair p from the hash table (backward-shift deletion). */
static void unlink_pair(MergeLoop *s, int32_t p) {
    size_t i = pair_hash(s->pairs[p].left, s->pairs[p].right) & s->table_mask;
    while (s->table[i] != p) i = (i + 1) & s->table_mask;
    size_t j = i;
    for (;;) {
        j = (j + 1) & s->table_mask;
        int32_t q = s->table[j];
        if (q < 0) break;
        size_t home = pair_hash(s->pairs[q].left, s->pairs[q].right) & s->table_mask;
        /* q may fill the hole at i if its home is not in (i, j] cyclically */
        if (((j - home) & s->table_mask) >= ((j - i) & s->table_mask)) {
            s->table[i] = q;
            i = j;
        }
    }
    s->table[i] = -1;
    s->table_used--;
}

static int release_pair(MergeLoop *s, int32_t p) {
    free(s->pairs[p].words);
    s->pairs[p].words = NULL;
    if (grow((void **)&s->free_pairs, &s->free_cap, s->nfree + 1, sizeof(int32_t)) < 0) return -1;
    s->free_pairs[s->nfree++] = p;
    return 0;
}

/* --- the heap ------------------------------------------------------------- */

static inline int bytes_cmp(MergeLoop *s, uint32_t a, uint32_t b) {
    uint32_t la = s->tok_len[a], lb = s->tok_len[b];
    int c = memcmp(s->tok_bytes + s->tok_off[a], s->tok_bytes + s->tok_off[b], la < lb ? la : lb);
    if (c) return c;
    return (la > lb) - (la < lb);
}

#define SCOUNT(s, p, t) ((s)->scount[(size_t)(p) * (s)->nsources + (t)])
#define SPOS(s, p, t) ((s)->spos[(size_t)(p) * (s)->nsources + (t)])

/* The heaps: src -1 is the plain heap, src t >= 0 source t's heap. The heap
 * functions are always inlined, so that where src is the constant -1 (plain
 * training) the compiler drops the sources' branches: plain training runs as
 * fast as with one heap only. */
#define HEAP_FN static inline __attribute__((always_inline))
HEAP_FN Heap *heap_of(MergeLoop *s, long src) { return src < 0 ? &s->heap : &s->sheaps[src]; }

/* Whether pair p comes before pair q in heap src: the pair training picks first. */
HEAP_FN int better(MergeLoop *s, long src, int32_t p, int32_t q) {
    PairRec *a = &s->pairs[p], *b = &s->pairs[q];
    if (src >= 0 && SCOUNT(s, p, src) != SCOUNT(s, q, src)) return SCOUNT(s, p, src) > SCOUNT(s, q, src);
    if (a->count != b->count) return a->count > b->count;
    if (s->rank) {
        uint32_t ra = s->rank[a->left], rb = s->rank[b->left];
        if (ra != rb) return ra < rb;
        return s->rank[a->right] < s->rank[b->right];
    }
    int c = bytes_cmp(s, a->left, b->left);
    if (c) return c > 0;
    return bytes_cmp(s, a->right, b->right) > 0;
}

HEAP_FN int32_t *slot_of(MergeLoop *s, long src, int32_t p) {
    return src < 0 ? &s->pairs[p].heap_pos : &SPOS(s, p, src);
}

HEAP_FN void heap_set(MergeLoop *s, long src, size_t i, int32_t p) {
    heap_of(s, src)->items[i] = p;
    *slot_of(s, src, p) = (int32_t)i;
}

HEAP_FN void sift_up(MergeLoop *s, long src, size_t i) {
    int32_t *items = heap_of(s, src)->items;
    int32_t p = items[i];
    while (i) {
        size_t parent = (i - 1) / 2;
        if (!better(s, src, p, items[parent])) break;
        heap_set(s, src, i, items[parent]);
        i = parent;
    }
    heap_set(s, src, i, p);
}

HEAP_FN void sift_down(MergeLoop *s, long src, size_t i) {
    Heap *h = heap_of(s, src);
    int32_t p = h->items[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->len) break;
        if (child + 1 < h->len && better(s, src, h->items[child + 1], h->items[child])) child++;
        if (!better(s, src, h->items[child], p)) break;
        heap_set(s, src, i, h->items[child]);
        i = child;
    }
    heap_set(s, src, i, p);
}

/* Appends p to heap src without ordering it (heapify follows, or sift_up). */
static int heap_append(MergeLoop *s, long src, int32_t p) {
    Heap *h = heap_of(s, src);
    if (grow((void **)&h->items, &h->cap, h->len + 1, sizeof(int32_t)) < 0) return -1;
    heap_set(s, src, h->len++, p);
    return 0;
}

static int heap_push(MergeLoop *s, long src, int32_t p) {
    if (heap_append(s, src, p) < 0) return -1;
    sift_up(s, src, heap_of(s, src)->len - 1);
    return 0;
}

static void heapify(MergeLoop *s, long src) {
    for (size_t i = heap_of(s, src)->len / 2; i-- > 0;) sift_down(s, src, i);
}

HEAP_FN void heap_remove(MergeLoop *s, long src, int32_t p) {
    Heap *h = heap_of(s, src);
    int32_t *slot = slot_of(s, src, p);
    size_t i = (size_t)*slot;
    *slot = -1;
    h->len--;
    if (i == h->len) return;
    int32_t moved = h->items[h->len];
    heap_set(s, src, i, moved);
    if (i && better(s, src, moved, h->items[(i - 1) / 2]))
        sift_up(s, src, i);
    else
        sift_down(s, src, i);
}

/* Plain training's sift_down, out of line as it was before the sources' heaps:
 * lose() calls it for almost every merge site. */
static __attribute__((noinline)) void sift_down_plain(MergeLoop *s, size_t i) { sift_down(s, -1, i); }

/* Takes pair p out of every heap that holds it. */
static void heap_remove_all(MergeLoop *s, int32_t p) {
    if (s->pairs[p].heap_pos >= 0) heap_remove(s, -1, p);
    for (size_t t = 0; t < s->nsources; t++)
        if (SPOS(s, p, t) >= 0) heap_remove(s, (long)t, p);
}

/* Forgets pair p: no count, no index, no heap slot. */
static int forget_pair(MergeLoop *s, int32_t p) {
    if (s->nsources)
        heap_remove_all(s, p);
    else if (s->pairs[p].heap_pos >= 0)
        heap_remove(s, -1, p);
    unlink_pair(s, p);
    return release_pair(s, p);
}

/* --- tokens and their bytes ----------------------------------------------- */

static inline uint64_t bytes_hash(const unsigned char *b, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ULL; }
    return mix(h);
}

static int spelled_find(MergeLoop *s, const unsigned char *b, size_t n) {
    size_t i = bytes_hash(b, n) & s->spelled_mask;
    for (;;) {
        int32_t t = s->spelled[i];
        if (t < 0) return 0;
        if (s->tok_len[t] == n && !memcmp(s->tok_bytes + s->tok_off[t], b, n)) return 1;
        i = (i + 1) & s->spelled_mask;
    }
}

static int spelled_insert(MergeLoop *s, int32_t token) {
    if (2 * (s->spelled_used + 1) > s->spelled_mask + 1) {
        size_t slots = 2 * (s->spelled_mask + 1);
        int32_t *set = malloc(slots * sizeof(int32_t));
        if (!set) { PyErr_NoMemory(); return -1; }
        memset(set, 0xff, slots * sizeof(int32_t));
        for (size_t i = 0; i <= s->spelled_mask; i++) {
            int32_t t = s->spelled[i];
            if (t < 0) continue;
            size_t j = bytes_hash(s->tok_bytes + s->tok_off[t], s->tok_len[t]) & (slots - 1);
            while (set[j] >= 0) j = (j + 1) & (slots - 1);
            set[j] = t;
        }
        free(s->spelled);
        s->spelled = set;
        s->spelled_mask = slots - 1;
    }
    size_t i = bytes_hash(s->tok_bytes + s->tok_off[token], s->tok_len[token]) & s->spelled_mask;
    while (s->spelled[i] >= 0) i = (i + 1) & s->spelled_mask;
    s->spelled[i] = token;
    s->spelled_used++;
    return 0;
}

/* Appends a token spelling the n bytes at b, with its tie-break rank. */
static int add_token(MergeLoop *s, const unsigned char *b, size_t n, uint32_t rank) {
    if (grow((void **)&s->tok_bytes, &s->tok_bytes_cap, s->tok_bytes_len + n, 1) < 0) return -1;
    size_t cap = s->tok_cap;
    if (grow((void **)&s->tok_off, &cap, s->ntokens + 1, sizeof(uint64_t)) < 0) return -1;
    cap = s->tok_cap;
    if (grow((void **)&s->tok_len, &cap, s->ntokens + 1, sizeof(uint32_t)) < 0) return -1;
    if (s->rank) {
        cap = s->tok_cap;
        if (grow((void **)&s->rank, &cap, s->ntokens + 1, sizeof(uint32_t)) < 0) return -1;
    }
    s->tok_cap = cap;
    /* b may lie in tok_bytes' spare room: learn() reserves it, so grow() above moved nothing */
    memcpy(s->tok_bytes + s->tok_bytes_len, b, n);
    s->tok_off[s->ntokens] = s->tok_bytes_len;
    s->tok_len[s->ntokens] = (uint32_t)n;
    if (s->rank) s->rank[s->ntokens] = rank;
    s->tok_bytes_len += n;
    s->ntokens++;
    return spelled_insert(s, (int32_t)(s->ntokens - 1));
}

/* --- applying one merge --------------------------------------------------- */

/* With sources: pair p's count in source src fell by count (its total already has):
 * it moves down in every heap that holds it, leaves those where its count falls
 * below min_frequency, and is forgotten when no heap holds it any more. Out of
 * line, so that plain training's lose() stays small. */
static __attribute__((noinline)) int lose_in_source(MergeLoop *s, int32_t p, count_t count, size_t src) {
    SCOUNT(s, p, src) -= count;
    int held = 0;
    for (size_t t = 0; t < s->nsources; t++) {
        if (SPOS(s, p, t) < 0) continue;
        if (SCOUNT(s, p, t) < s->min_frequency) {
            heap_remove(s, (long)t, p);
        } else {
            sift_down(s, (long)t, (size_t)SPOS(s, p, t));
            held = 1;
        }
    }
    return held ? 0 : forget_pair(s, p);
}

/* The merge-site functions below take by_source, a constant where they are
 * inlined: merge_word() is compiled once for plain training, with no test of
 * the sources left in it, and once for parity-aware training. */
#define SITE_FN static inline __attribute__((always_inline))

/* The count of pair (left, right) falls by count (in source src): forgotten below
 * min_frequency, or with sources as lose_in_source says. */
SITE_FN int lose(MergeLoop *s, uint32_t left, uint32_t right, count_t count, size_t src, int by_source) {
    int32_t p = find_pair(s, left, right);
    if (p < 0) return 0; /* already forgotten */
    s->pairs[p].count -= count;
    if (by_source) return lose_in_source(s, p, count, src);
    if (s->pairs[p].count < s->min_frequency) return forget_pair(s, p);
    if (s->pairs[p].heap_pos >= 0) sift_down_plain(s, (size_t)s->pairs[p].heap_pos);
    return 0;
}

/* The count of pair (left, right) rises by count in word i of source src (a pair
 * with the new token, in no heap until the merge is done). */
SITE_FN int gain(MergeLoop *s, uint32_t left, uint32_t right, count_t count, uint32_t i, size_t src,
                 int by_source) {
    int32_t p = find_pair(s, left, right);
    if (by_source && p >= 0) SCOUNT(s, p, src) += count;
    if (p < 0) {
        p = add_pair(s, left, right, count, i);
        if (p < 0) return -1;
        if (by_source) SCOUNT(s, p, src) = count;
        if (grow((void **)&s->created, &s->created_cap, s->ncreated + 1, sizeof(int32_t)) < 0) return -1;
        s->created[s->ncreated++] = p;
        return 0;
    }
    s->pairs[p].count += count;
    if (s->pairs[p].heap_pos >= 0) sift_up(s, -1, (size_t)s->pairs[p].heap_pos);
    return add_word(&s->pairs[p], i);
}

/* Merges (a, b) into new in word i and updates the pairs around each site,
 * exactly as bpe/training/merge_loop.py's _apply_merge does. */
SITE_FN int merge_word(MergeLoop *s, uint32_t i, uint32_t a, uint32_t b, uint32_t new, int by_source) {
    uint32_t *w = s->symbols + s->start[i];
    uint32_t n = s->len[i], out = 0, nsites = 0;
    if (grow((void **)&s->sites, &s->sites_cap, n, sizeof(uint32_t)) < 0) return -1;
    for (uint32_t k = 0; k < n;) {
        if (k + 1 < n && w[k] == a && w[k + 1] == b) {
            s->sites[nsites++] = out;
            w[out++] = new;
            k += 2;
        } else {
            w[out++] = w[k++];
        }
    }
    if (!nsites) return 0; /* the pair left this word through an earlier merge */
    s->len[i] = out;
    count_t count = (count_t)s->wcount[i];
    size_t src = by_source ? s->wsource[i] : 0;
    if (by_source) s->stokens[src] -= count * nsites;
    uint32_t last = out - 1;
    for (uint32_t m = 0; m < nsites; m++) {
        uint32_t k = s->sites[m];
        if (k) {
            uint32_t neighbour = w[k - 1];
            if (lose(s, neighbour == new ? b : neighbour, a, count, src, by_source) < 0) return -1;
            if (gain(s, neighbour, new, count, i, src, by_source) < 0) return -1;
        }
        if (k < last) {
            uint32_t neighbour = w[k + 1];
            if (neighbour != new) {
                if (lose(s, b, neighbour, count, src, by_source) < 0) return -1;
                if (gain(s, new, neighbour, count, i, src, by_source) < 0) return -1;
            }
        }
    }
    return 0;
}

/* Puts a new pair into the heaps it qualifies for (pushed, or appended when
 * heapify follows); forgets it when it qualifies for none. */
static int place_pair(MergeLoop *s, int32_t q, int (*put)(MergeLoop *, long, int32_t)) {
    if (!s->nsources)
        return s->pairs[q].count >= s->min_frequency ? put(s, -1, q) : forget_pair(s, q);
    int held = 0;
    for (size_t t = 0; t < s->nsources; t++) {
        if (SCOUNT(s, q, t) >= s->min_frequency) {
            if (put(s, (long)t, q) < 0) return -1;
            held = 1;
        }
    }
    return held ? 0 : forget_pair(s, q);
}

static int enter_heaps(MergeLoop *s, int32_t q) { return place_pair(s, q, heap_push); }

/* Applies pair p (already out of the table and the heaps) as token new. */
static int apply_merge(MergeLoop *s, int32_t p, uint32_t new) {
    uint32_t a = s->pairs[p].left, b = s->pairs[p].right;
    uint32_t *words = s->pairs[p].words, nwords = s->pairs[p].nwords;
    s->pairs[p].words = NULL;
    int rc = 0;
    s->ncreated = 0;
    if (s->nsources)
        for (uint32_t m = 0; m < nwords && rc == 0; m++) rc = merge_word(s, words[m], a, b, new, 1);
    else
        for (uint32_t m = 0; m < nwords && rc == 0; m++) rc = merge_word(s, words[m], a, b, new, 0);
    free(words);
    if (rc == 0) rc = release_pair(s, p);
    for (size_t m = 0; m < s->ncreated && rc == 0; m++) {
        int32_t q = s->created[m];
        if (s->nsources)
            rc = enter_heaps(s, q);
        else
            rc = s->pairs[q].count >= s->min_frequency ? heap_push(s, -1, q) : forget_pair(s, q);
    }
    return rc;
}

/* --- the Python type ------------------------------------------------------ */

static void MergeLoop_dealloc(MergeLoop *s) {
    for (size_t p = 0; p < s->npairs_alloc; p++) free(s->pairs[p].words);
    free(s->pairs); free(s->free_pairs); free(s->table); free(s->heap.items);
    for (size_t t = 0; s->sheaps && t < s->nsources; t++) free(s->sheaps[t].items);
    free(s->sheaps); free(s->wsource); free(s->sbytes); free(s->stokens); free(s->scount); free(s->spos);
    free(s->symbols); free(s->start); free(s->len); free(s->wcount);
    free(s->tok_bytes); free(s->tok_off); free(s->tok_len); free(s->rank); free(s->spelled);
    free(s->created); free(s->sites);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int as_count(PyObject *obj, count_t *out) {
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (!overflow) { *out = value; return 0; }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (count_t)v;
    return 0;
}

/* Reads the IDs of one word: a bytes object (one ID per byte) or a str (one per code point). */
static int read_word(MergeLoop *s, PyObject *word, size_t i, size_t *used, size_t *cap) {
    Py_ssize_t n;
    if (PyBytes_Check(word)) {
        n = PyBytes_GET_SIZE(word);
    } else if (PyUnicode_Check(word)) {
        n = PyUnicode_GET_LENGTH(word);
    } else {
        PyErr_SetString(PyExc_TypeError, "words must be bytes or str");
        return -1;
    }
    if (n > UINT32_MAX) { PyErr_SetString(PyExc_OverflowError, "word too long"); return -1; }
    if (grow((void **)&s->symbols, cap, *used + (size_t)n, sizeof(uint32_t)) < 0) return -1;
    uint32_t *dst = s->symbols + *used;
    if (PyBytes_Check(word)) {
        const unsigned char *src = (const unsigned char *)PyBytes_AS_STRING(word);
        for (Py_ssize_t k = 0; k < n; k++) dst[k] = src[k];
    } else {
        int kind = PyUnicode_KIND(word);
        const void *data = PyUnicode_DATA(word);
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, k);
            if (c >= s->ntokens) { PyErr_SetString(PyExc_ValueError, "word uses an unknown token ID"); return -1; }
            dst[k] = c;
        }
    }
    s->start[i] = *used;
    s->len[i] = (uint32_t)n;
    *used += (size_t)n;
    return 0;
}

/* Counts every pair of every word; keeps those that reach min_frequency in the heap. */
static int count_pairs(MergeLoop *s) {
    for (size_t i = 0; i < s->nwords; i++) {
        if (!(i & 0xffff) && PyErr_CheckSignals() < 0) return -1;
        const uint32_t *w = s->symbols + s->start[i];
        count_t count = (count_t)s->wcount[i];
        size_t src = s->nsources ? s->wsource[i] : 0;
        if (s->nsources) s->stokens[src] += count * s->len[i];
        for (uint32_t k = 0; k + 1 < s->len[i]; k++) {
            int32_t p = find_pair(s, w[k], w[k + 1]);
            if (p < 0) {
                if ((p = add_pair(s, w[k], w[k + 1], count, (uint32_t)i)) < 0) return -1;
            } else {
                s->pairs[p].count += count;
                if (add_word(&s->pairs[p], (uint32_t)i) < 0) return -1;
            }
            if (s->nsources) SCOUNT(s, p, src) += count;
        }
    }
    for (size_t p = 0; p < s->npairs_alloc; p++)
        if (place_pair(s, (int32_t)p, heap_append) < 0) return -1;
    heapify(s, -1);
    for (size_t t = 0; t < s->nsources; t++) heapify(s, (long)t);
    return 0;
}

/* Parity-aware training: reads each word's source and each source's bytes (both None: plain training). */
static int read_sources(MergeLoop *s, PyObject *sources, PyObject *source_bytes) {
    if (sources == Py_None && source_bytes == Py_None) return 0;
    if (!PyList_Check(sources) || !PyList_Check(source_bytes) || (size_t)PyList_GET_SIZE(sources) != s->nwords ||
        PyList_GET_SIZE(source_bytes) == 0) {
        PyErr_SetString(PyExc_ValueError, "sources must be a list, one source per word, and source_bytes a non-empty list");
        return -1;
    }
    s->nsources = (size_t)PyList_GET_SIZE(source_bytes);
    s->wsource = malloc((s->nwords ? s->nwords : 1) * sizeof(uint32_t));
    s->sbytes = calloc(s->nsources, sizeof(count_t));
    s->stokens = calloc(s->nsources, sizeof(count_t));
    s->sheaps = calloc(s->nsources, sizeof(Heap));
    if (!s->wsource || !s->sbytes || !s->stokens || !s->sheaps) { PyErr_NoMemory(); return -1; }
    for (size_t t = 0; t < s->nsources; t++)
        if (as_count(PyList_GET_ITEM(source_bytes, t), &s->sbytes[t]) < 0) return -1;
    for (size_t i = 0; i < s->nwords; i++) {
        unsigned long src = PyLong_AsUnsignedLong(PyList_GET_ITEM(sources, i));
        if (src == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (src >= s->nsources) { PyErr_SetString(PyExc_ValueError, "a word's source is out of range"); return -1; }
        s->wsource[i] = (uint32_t)src;
    }
    return 0;
}

/* Parity-aware training: the source with the fewest bytes per token among those
 * with a pair to merge (ties to the lowest index), or -1 when none has one. */
static long worst_source(MergeLoop *s) {
    long worst = -1;
    for (size_t t = 0; t < s->nsources; t++) {
        if (!s->sheaps[t].len) continue;
        /* bytes[t] / tokens[t] < bytes[w] / tokens[w], cross-multiplied (the caller keeps bytes below 2**63) */
        if (worst < 0 || s->sbytes[t] * s->stokens[worst] < s->sbytes[worst] * s->stokens[t]) worst = (long)t;
    }
    return worst;
}

static int MergeLoop_init(MergeLoop *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"words", "counts", "token_bytes", "min_frequency", "ranks", "sources", "source_bytes", NULL};
    PyObject *words, *counts, *token_bytes, *min_frequency, *ranks = Py_None, *sources = Py_None, *source_bytes = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!O|OOO", kwlist, &PyList_Type, &words, &PyList_Type, &counts,
                                     &PyList_Type, &token_bytes, &min_frequency, &ranks, &sources, &source_bytes))
        return -1;
    if (s->symbols || s->table) { PyErr_SetString(PyExc_RuntimeError, "MergeLoop is initialised once"); return -1; }
    if (PyList_GET_SIZE(words) != PyList_GET_SIZE(counts)) {
        PyErr_SetString(PyExc_ValueError, "words and counts differ in length");
        return -1;
    }
    if ((size_t)PyList_GET_SIZE(words) > UINT32_MAX) { PyErr_SetString(PyExc_OverflowError, "too many words"); return -1; }
    if (as_count(min_frequency, &s->min_frequency) < 0) return -1;
    Py_ssize_t ntok = PyList_GET_SIZE(token_bytes);
    if (ranks != Py_None) {
        if (!PyList_Check(ranks) || PyList_GET_SIZE(ranks) != ntok) {
            PyErr_SetString(PyExc_ValueError, "ranks must be a list, one rank per token");
            return -1;
        }
        s->rank = malloc((size_t)(ntok ? ntok : 1) * sizeof(uint32_t));
        if (!s->rank) { PyErr_NoMemory(); return -1; }
    }
    s->spelled = malloc(1024 * sizeof(int32_t));
    if (!s->spelled) { PyErr_NoMemory(); return -1; }
    memset(s->spelled, 0xff, 1024 * sizeof(int32_t));
    s->spelled_mask = 1023;
    for (Py_ssize_t t = 0; t < ntok; t++) {
        PyObject *tok = PyList_GET_ITEM(token_bytes, t);
        if (!PyBytes_Check(tok)) { PyErr_SetString(PyExc_TypeError, "token_bytes must hold bytes"); return -1; }
        uint32_t rank = 0;
        if (s->rank) {
            unsigned long r = PyLong_AsUnsignedLong(PyList_GET_ITEM(ranks, t));
            if (r == (unsigned long)-1 && PyErr_Occurred()) return -1;
            rank = (uint32_t)r;
        }
        if (add_token(s, (const unsigned char *)PyBytes_AS_STRING(tok), (size_t)PyBytes_GET_SIZE(tok), rank) < 0)
            return -1;
    }

    s->nwords = (size_t)PyList_GET_SIZE(words);
    if (read_sources(s, sources, source_bytes) < 0) return -1;
    size_t n = s->nwords ? s->nwords : 1;
    s->start = malloc(n * sizeof(uint64_t));
    s->len = malloc(n * sizeof(uint32_t));
    s->wcount = malloc(n * sizeof(uint64_t));
    if (!s->start || !s->len || !s->wcount) { PyErr_NoMemory(); return -1; }
    size_t used = 0, cap = 0;
    for (size_t i = 0; i < s->nwords; i++) {
        if (read_word(s, PyList_GET_ITEM(words, i), i, &used, &cap) < 0) return -1;
        unsigned long long c = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(counts, i));
        if (c == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        s->wcount[i] = c;
    }
    if (used < cap && used) { /* give back the slack of the doubling */
        uint32_t *shrunk = realloc(s->symbols, used * sizeof(uint32_t));
        if (shrunk) s->symbols = shrunk;
    }
    if (table_resize(s, 1024) < 0) return -1;
    return count_pairs(s);
}

PyDoc_STRVAR(learn_doc,
"learn(merges, target) -> bool\n\n"
"Learns merges until len(merges) == target, appending each (left, right) to\n"
"merges. Returns False when no pair is left to merge, True otherwise.");

static PyObject *MergeLoop_learn(MergeLoop *s, PyObject *args) {
    PyObject *merges;
    Py_ssize_t target;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &merges, &target)) return NULL;
    if (!s->table) { PyErr_SetString(PyExc_RuntimeError, "MergeLoop is not initialised"); return NULL; }
    while (PyList_GET_SIZE(merges) < target) {
        /* between merges the state is whole: a KeyboardInterrupt leaves it usable */
        if (PyErr_CheckSignals() < 0) return NULL;
        long src = s->nsources ? worst_source(s) : -1;
        if (!heap_of(s, src)->len) Py_RETURN_FALSE;
        int32_t p = heap_of(s, src)->items[0];
        uint32_t a = s->pairs[p].left, b = s->pairs[p].right;
        size_t na = s->tok_len[a], nb = s->tok_len[b];
        /* the new token's bytes, assembled apart from tok_bytes, which may move */
        if (grow((void **)&s->tok_bytes, &s->tok_bytes_cap, s->tok_bytes_len + 2 * (na + nb), 1) < 0) return NULL;
        unsigned char *scratch = s->tok_bytes + s->tok_bytes_len + na + nb;
        memcpy(scratch, s->tok_bytes + s->tok_off[a], na);
        memcpy(scratch + na, s->tok_bytes + s->tok_off[b], nb);
        if (spelled_find(s, scratch, na + nb)) {
            /* the duplicate-bytes rule: never chosen, so forget the pair */
            if (forget_pair(s, p) < 0) return NULL;
            continue;
        }
        if (s->ntokens > 0x10ffff) { PyErr_SetString(PyExc_OverflowError, "too many tokens"); return NULL; }
        uint32_t new = (uint32_t)s->ntokens;
        PyObject *pair = Py_BuildValue("(II)", a, b);
        if (!pair) return NULL;
        if (PyList_Append(merges, pair) < 0) { Py_DECREF(pair); return NULL; }
        Py_DECREF(pair);
        if (add_token(s, scratch, na + nb, new) < 0) return NULL;
        heap_remove_all(s, p);
        unlink_pair(s, p);
        if (apply_merge(s, p, new) < 0) return NULL;
    }
    Py_RETURN_TRUE;
}

static PyObject *MergeLoop_memory(MergeLoop *s, PyObject *Py_UNUSED(ignored)) {
    size_t total = s->nwords * (sizeof(uint64_t) * 2 + sizeof(uint32_t));
    for (size_t i = 0; i < s->nwords; i++) total += s->len[i] * sizeof(uint32_t);
    total += s->npairs_cap * sizeof(PairRec) + (s->table_mask + 1) * sizeof(int32_t) + s->heap.cap * sizeof(int32_t);
    total += s->scount_cap * sizeof(count_t) + s->spos_cap * sizeof(int32_t);
    for (size_t t = 0; t < s->nsources; t++) total += s->sheaps[t].cap * sizeof(int32_t);
    for (size_t p = 0; p < s->npairs_alloc; p++)
        if (s->pairs[p].words) total += s->pairs[p].capwords * sizeof(uint32_t);
    return PyLong_FromSize_t(total);
}

/* The words with every merge so far applied, as the loop takes them (one code point per ID). */
static PyObject *MergeLoop_current_words(MergeLoop *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *words = PyList_New((Py_ssize_t)s->nwords);
    if (!words) return NULL;
    for (size_t i = 0; i < s->nwords; i++) {
        PyObject *word = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s->symbols + s->start[i], s->len[i]);
        if (!word) { Py_DECREF(words); return NULL; }
        PyList_SET_ITEM(words, (Py_ssize_t)i, word);
    }
    return words;
}

static PyMethodDef MergeLoop_methods[] = {
    {"learn", (PyCFunction)MergeLoop_learn, METH_VARARGS, learn_doc},
    {"current_words", (PyCFunction)MergeLoop_current_words, METH_NOARGS,
     "The words with every merge so far applied: a str per word, one code point per token ID, in the given order."},
    {"memory", (PyCFunction)MergeLoop_memory, METH_NOARGS, "Bytes the loop holds now (words, pairs, heap)."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(MergeLoop_doc,
"MergeLoop(words, counts, token_bytes, min_frequency, ranks=None, sources=None, source_bytes=None)\n\n"
"The merge loop's state over a word-count table.\n\n"
"words: bytes or str per word (one token ID per byte or code point); counts:\n"
"one non-negative count per word, below 2**64; token_bytes: the bytes of every\n"
"token that exists (ID order); min_frequency: the smallest count a pair may\n"
"have to be merged (at least 1); ranks: None for ties to the greatest byte\n"
"pair, or one tie-break rank per token (ties to the smallest rank pair; a new\n"
"token's rank is its ID); sources, source_bytes: parity-aware training, each\n"
"word's source index and each source's bytes (see bpe/training/parity_loop.py).");

static PyTypeObject MergeLoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bpe._merges.MergeLoop",
    .tp_basicsize = sizeof(MergeLoop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = MergeLoop_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)MergeLoop_init,
    .tp_dealloc = (destructor)MergeLoop_dealloc,
    .tp_methods = MergeLoop_methods,
};

/* replay_lengths: the length of each word once new merges are replayed on it, in learned
 * order (bpe.training.extension.replay, whose result it equals word for word): per word,
 * every occurrence of the present pair learned first is merged, left to right, until no
 * adjacent pair is a merge. The merges live in an open-addressing table (pair -> rank). */
static inline uint64_t pair_key(uint32_t left, uint32_t right) { return ((uint64_t)left << 32) | right; }

static inline size_t key_slot(uint64_t key, size_t mask) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static int64_t merge_rank(const uint64_t *keys, const int64_t *ranks, size_t mask, uint64_t key) {
    for (size_t slot = key_slot(key, mask);; slot = (slot + 1) & mask) {
        if (ranks[slot] < 0) return -1;
        if (keys[slot] == key) return ranks[slot];
    }
}

PyDoc_STRVAR(replay_lengths_doc,
"replay_lengths(words, merges, first_id) -> list[int]\n\n"
"The length of each word (a str of token IDs) once the new merges (left, right),\n"
"merge i making ID first_id + i, are replayed on it in learned order.");

static PyObject *replay_lengths(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *words, *merges;
    unsigned long first_id;
    if (!PyArg_ParseTuple(args, "O!O!k", &PyList_Type, &words, &PyList_Type, &merges, &first_id)) return NULL;
    Py_ssize_t nmerges = PyList_GET_SIZE(merges), nwords = PyList_GET_SIZE(words);
    size_t cap = 16;
    while (cap < 2 * (size_t)nmerges) cap <<= 1;
    uint64_t *keys = malloc(cap * sizeof(uint64_t));
    int64_t *ranks = malloc(cap * sizeof(int64_t));
    uint64_t *by_rank = malloc((nmerges ? (size_t)nmerges : 1) * sizeof(uint64_t));
    uint32_t *symbols = NULL;
    size_t symbols_cap = 0;
    PyObject *lengths = NULL;
    if (!keys || !ranks || !by_rank) { PyErr_NoMemory(); goto done; }
    memset(ranks, 0xff, cap * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < nmerges; i++) {
        unsigned long left, right;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(merges, i), "kk", &left, &right)) goto done;
        uint64_t key = by_rank[i] = pair_key((uint32_t)left, (uint32_t)right);
        size_t slot = key_slot(key, cap - 1);
        while (ranks[slot] >= 0 && keys[slot] != key) slot = (slot + 1) & (cap - 1);
        keys[slot] = key;
        ranks[slot] = i; /* a repeated pair takes its last rank, as replay's dict does */
    }
    if (!(lengths = PyList_New(nwords))) goto done;
    for (Py_ssize_t w = 0; w < nwords; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        if (!PyUnicode_Check(word)) { PyErr_SetString(PyExc_TypeError, "words must be str"); goto fail; }
        Py_ssize_t n = PyUnicode_GET_LENGTH(word);
        if ((size_t)n > symbols_cap) {
            free(symbols);
            symbols_cap = (size_t)n * 2;
            if (!(symbols = malloc(symbols_cap * sizeof(uint32_t)))) { PyErr_NoMemory(); goto fail; }
        }
        int kind = PyUnicode_KIND(word);
        const void *data = PyUnicode_DATA(word);
        for (Py_ssize_t k = 0; k < n; k++) symbols[k] = PyUnicode_READ(kind, data, k);
        while (n > 1) {
            int64_t best = -1;
            for (Py_ssize_t k = 0; k + 1 < n; k++) {
                int64_t rank = merge_rank(keys, ranks, cap - 1, pair_key(symbols[k], symbols[k + 1]));
                if (rank >= 0 && (best < 0 || rank < best)) best = rank;
            }
            if (best < 0) break;
            uint64_t merged = by_rank[best];
            uint32_t left = (uint32_t)(merged >> 32), right = (uint32_t)merged, made = (uint32_t)(first_id + best);
            Py_ssize_t out = 0;
            for (Py_ssize_t k = 0; k < n; k++) {
                if (k + 1 < n && symbols[k] == left && symbols[k + 1] == right) { symbols[out++] = made; k++; }
                else symbols[out++] = symbols[k];
            }
            n = out;
        }
        PyObject *length = PyLong_FromSsize_t(n);
        if (!length) goto fail;
        PyList_SET_ITEM(lengths, w, length);
    }
    goto done;
fail:
    Py_CLEAR(lengths);
done:
    free(keys); free(ranks); free(by_rank); free(symbols);
    return lengths;
}

static PyMethodDef module_methods[] = {
    {"replay_lengths", replay_lengths, METH_VARARGS, replay_lengths_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef merges_module = {
    PyModuleDef_HEAD_INIT, .m_name = "bpe.training._merges", .m_doc = "The BPE merge loop in C (see bpe/training/merge_loop.py).", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__merges(void) {
    if (PyType_Ready(&MergeLoopType) < 0) return NULL;
    PyObject *m = PyModule_Create(&merges_module);
    if (!m) return NULL;
    Py_INCREF(&MergeLoopType);
    if (PyModule_AddObject(m, "MergeLoop", (PyObject *)&MergeLoopType) < 0) {
        Py_DECREF(&MergeLoopType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
