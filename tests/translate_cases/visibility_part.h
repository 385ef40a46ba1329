/* Included in the middle of visibility.c: a file-scope macro, type and static function. */
#define PART_SCALE 3
typedef struct { double lo, hi; } span_t;
static double clamp_to(span_t s, double v) { return v < s.lo ? s.lo : v > s.hi ? s.hi : v; }
