/* CRC-32C (Castagnoli), the checksum of TensorFlow's TFRecord framing that
 * TensorBoard's event files use, and the "masked" form TFRecord stores.
 * Debian 12 packages no C library for CRC-32C (its only crc32c package is
 * Python's, python3-crc32c, which the tests use as the reference), so it
 * is computed here, by table. */
#ifndef ST_CRC32C_H
#define ST_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes, continuing from crc (0 to start): the reflected
 * polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF, so that
 * st_crc32c(0, "123456789", 9) is the catalogue check value 0xE3069283. */
uint32_t st_crc32c(uint32_t crc, const void *data, size_t n);

/* TFRecord's mask of a CRC: rotated right by 15 bits plus 0xa282ead8, so a
 * record holding CRCs of its own bytes does not checksum to a fixed value. */
uint32_t st_crc32c_mask(uint32_t crc);

#endif
