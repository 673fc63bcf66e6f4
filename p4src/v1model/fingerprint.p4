/* Fingerprint (docs/protocol.md section 6), v1model: the ranks of a job must reduce the same
 * thing (dtype and length). Every ANNOUNCE carries the sender's fingerprint; per
 * (slot, version) two registers keep the minimum and the maximum over the announce round's
 * ranks, and the round's RESULT carries both. When they differ every rank sees the same two
 * values and raises the same error, instead of summing an int32 into a float or
 * zero-padding a shorter tensor. Only announces touch them; the stateful steps are the
 * shared bodies of common/bodies/fingerprint.p4. */
#ifndef P4REDUCE_FINGERPRINT_P4
#define P4REDUCE_FINGERPRINT_P4
#include "../common/headers.p4"
#include "../common/bodies/fingerprint.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

control Fingerprint(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(SLOT_ENTRIES) fingerprint_min;
    register<bit<32>>(SLOT_ENTRIES) fingerprint_max;

    action widen_range() {
        REGISTER_STEP(fingerprint_min, meta.slot_index, bit<32>,
                      hdr.fingerprint.fingerprint_min, FINGERPRINT_MIN_BODY)
        REGISTER_STEP(fingerprint_max, meta.slot_index, bit<32>,
                      hdr.fingerprint.fingerprint_max, FINGERPRINT_MAX_BODY)
    }
    action read_range() {
        REGISTER_STEP(fingerprint_min, meta.slot_index, bit<32>,
                      hdr.fingerprint.fingerprint_min, READ_BODY)
        REGISTER_STEP(fingerprint_max, meta.slot_index, bit<32>,
                      hdr.fingerprint.fingerprint_max, READ_BODY)
    }

    action store_range() {
        fingerprint_min.write(meta.slot_index, hdr.fingerprint.fingerprint_min);
        fingerprint_max.write(meta.slot_index, hdr.fingerprint.fingerprint_max);
    }

    apply {
        if (hdr.fingerprint.isValid()) {
            if (meta.store_result == 1) {
                store_range();   /* a leaf keeps the spine's range (uplink.p4) */
            } else if (meta.duplicate == 0) {
                widen_range();
            } else {
                read_range();
            }
        }
    }
}
#endif
