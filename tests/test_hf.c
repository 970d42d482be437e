/* Unit checks of the Hugging Face import's number conversion: every one of
 * the 65536 IEEE half-precision bit patterns (zeros, subnormals, normals,
 * infinities, NaNs) converts to the float the compiler's own _Float16 gives,
 * an independent reference, bit for bit (NaNs: still NaN, same sign). */
#include "hf/hf_import.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

int main(void)
{
    int bad = 0, nans = 0, subnormals = 0;
    uint32_t first_bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        _Float16 ref16;
        memcpy(&ref16, &h, sizeof h);
        float want = (float)ref16, got = st_hf_half_to_float(h);
        int same;
        if (isnan(want)) {
            nans++;
            same = isnan(got) && signbit(got) == signbit(want);
        } else {
            uint32_t wb, gb;
            memcpy(&wb, &want, 4);
            memcpy(&gb, &got, 4);
            same = wb == gb;
            subnormals += ((b >> 10) & 0x1f) == 0 && (b & 0x3ff) != 0;
        }
        if (!same && bad++ == 0)
            first_bad = b;
    }
    tap_ok(bad == 0, "all 65536 halves convert as _Float16 does (%d differ, first 0x%04x)",
           bad, (unsigned)first_bad);
    tap_ok(nans == 2 * 1023 && subnormals == 2 * 1023,
           "the sweep covered %d NaNs and %d subnormals", nans, subnormals);
    tap_ok(st_hf_half_to_float(0x7c00) == INFINITY && st_hf_half_to_float(0xfc00) == -INFINITY,
           "infinities");
    tap_ok(st_hf_half_to_float(0x0001) == 0x1p-24f && st_hf_half_to_float(0x8000) == 0.0f &&
               signbit(st_hf_half_to_float(0x8000)),
           "smallest subnormal is 2^-24; negative zero keeps its sign");
    return tap_done();
}
