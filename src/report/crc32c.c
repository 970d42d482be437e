/* CRC-32C by the byte-at-a-time table (crc32c.h says why it is here, not
 * from a library).  The event files hold a few kilobytes per logged step,
 * so the 1 KiB table, built on first use, is fast enough; hardware CRC
 * instructions would tie the file to one CPU family for no gain. */
#include "report/crc32c.h"

#include <pthread.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
        crc_table[b] = c;
    }
}

uint32_t st_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_table_once, build_table);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t st_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
