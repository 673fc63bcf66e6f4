/* Register-action bodies of the fingerprint range (docs/protocol.md section 6); see
 * contributor_bitmap.p4 for what a body is. Per (slot, version) the minimum and the maximum
 * of the announce round's fingerprints; the first announce (FIRST == 1) overwrites.
 * v1model keeps them in two bit<32> registers (FINGERPRINT_MIN_BODY, FINGERPRINT_MAX_BODY:
 * FIRST is meta.first, rv = the value after this packet); TNA in one pair_t register, one
 * stateful ALU updating both halves (FINGERPRINT_RANGE_BODY, with FIRST a constant: one
 * step per case, chosen by table, as for the lanes). A Tofino 1 ALU returns one value: rv
 * is the maximum, and the read-out pass reads the minimum (docs/tofino.md). */
#ifndef P4REDUCE_BODIES_FINGERPRINT_P4
#define P4REDUCE_BODIES_FINGERPRINT_P4
#define FINGERPRINT_MIN_UPDATE(CELL, FIRST)                                    \
    if (FIRST == 1 || hdr.fingerprint.fingerprint_min < CELL) {                \
        CELL = hdr.fingerprint.fingerprint_min;                                \
    }

#define FINGERPRINT_MAX_UPDATE(CELL, FIRST)                                    \
    if (FIRST == 1 || hdr.fingerprint.fingerprint_max > CELL) {                \
        CELL = hdr.fingerprint.fingerprint_max;                                \
    }

#define FINGERPRINT_MIN_BODY                                                   \
    FINGERPRINT_MIN_UPDATE(value, meta.first)                                  \
    rv = value;

#define FINGERPRINT_MAX_BODY                                                   \
    FINGERPRINT_MAX_UPDATE(value, meta.first)                                  \
    rv = value;

/* lo = the minimum, hi = the maximum */
#define FINGERPRINT_RANGE_BODY(FIRST)                                          \
    FINGERPRINT_MIN_UPDATE(value.lo, FIRST)                                    \
    FINGERPRINT_MAX_UPDATE(value.hi, FIRST)                                    \
    rv = value.hi;
#endif
