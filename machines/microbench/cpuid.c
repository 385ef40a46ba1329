/* The cache geometry the CPU itself reports through CPUID, for hosts whose sysfs has no cache description
 * (sandboxes such as gVisor, some containers) and no lscpu that can read one.
 *
 * Intel: leaf 4 (deterministic cache parameters); AMD and Hygon: leaf 0x8000001D, the same layout. Output:
 * `smt=N` (logical CPUs per core, leaf 0xB's SMT level; 1 where the CPU does not say), then one line per data
 * or unified cache: `cache level=L type=data|unified size=BYTES line=BYTES ways=W sharing=T`, T = logical
 * CPUs sharing one instance and W = 0 for a fully associative cache. Prints only `smt=` elsewhere (not x86).
 * Hand-written: no library reads CPUID, and a probe kit's target has no compiler. Usage: cpuid
 */
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned smt_per_core(void) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, 0) < 0xB) return 1;
  __cpuid_count(0xB, 0, a, b, c, d);
  unsigned level_type = (c >> 8) & 0xff, logical = b & 0xffff;
  return level_type == 1 && logical > 0 ? logical : 1;
}

static void print_caches(unsigned leaf) {
  for (unsigned sub = 0; sub < 16; sub++) {
    unsigned a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    unsigned type = a & 0x1f;
    if (type == 0) break;
    if (type == 2) continue; /* instruction cache */
    unsigned level = (a >> 5) & 0x7, sharing = ((a >> 14) & 0xfff) + 1, fully = (a >> 9) & 1;
    unsigned long line = (b & 0xfff) + 1, parts = ((b >> 12) & 0x3ff) + 1, ways = ((b >> 22) & 0x3ff) + 1;
    unsigned long sets = (unsigned long)c + 1;
    printf("cache level=%u type=%s size=%lu line=%lu ways=%lu sharing=%u\n", level,
           type == 1 ? "data" : "unified", ways * parts * line * sets, line, fully ? 0UL : ways, sharing);
  }
}

int main(void) {
  unsigned a, b, c, d;
  char vendor[13] = {0};
  __cpuid(0, a, b, c, d);
  memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
  printf("smt=%u\n", smt_per_core());
  int amd = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
  if (amd && __get_cpuid_max(0x80000000, 0) >= 0x8000001D)
    print_caches(0x8000001D);
  else if (!amd && a >= 4)
    print_caches(4);
  return 0;
}
#else
int main(void) {
  printf("smt=1\n");
  return 0;
}
#endif
