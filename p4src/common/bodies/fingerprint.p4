/* Register-action bodies of the fingerprint range (docs/protocol.md section 6); see
 * contributor_bitmap.p4 for what a body is. Two bit<32> registers per (slot, version), so a
 * Tofino-class ALU returns each in one pass: the minimum and the maximum of the announce
 * round's fingerprints; the first announce overwrites. rv = the value after this packet. */
#ifndef P4REDUCE_BODIES_FINGERPRINT_P4
#define P4REDUCE_BODIES_FINGERPRINT_P4
#define FINGERPRINT_MIN_BODY                                                   \
    if (meta.first == 1 || hdr.fingerprint.fingerprint_min < value) {          \
        value = hdr.fingerprint.fingerprint_min;                               \
    }                                                                          \
    rv = value;

#define FINGERPRINT_MAX_BODY                                                   \
    if (meta.first == 1 || hdr.fingerprint.fingerprint_max > value) {          \
        value = hdr.fingerprint.fingerprint_max;                               \
    }                                                                          \
    rv = value;
#endif
