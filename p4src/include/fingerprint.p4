/* Fingerprint: the ranks of a job must reduce the same thing (dtype and length). Every
 * ANNOUNCE carries the sender's fingerprint; per (slot, version) one register keeps the
 * minimum (high half) and maximum (low half) over the announce round's ranks, and the
 * round's RESULT carries both. When they differ every rank sees the same two values and
 * raises the same error, instead of summing an int32 into a float or zero-padding a
 * shorter tensor. The first announce of a round overwrites the range; one read-modify-write
 * per packet, and only announces touch it. */
#ifndef P4REDUCE_FINGERPRINT_P4
#define P4REDUCE_FINGERPRINT_P4
#include "headers.p4"

control Fingerprint(inout headers_t hdr, inout metadata_t meta) {
    register<bit<64>>(SLOT_ENTRIES) fingerprint_range;

    action widen_range() {
        bit<64> stored;
        fingerprint_range.read(stored, meta.slot_index);
        bit<32> low = hdr.fingerprint.fingerprint_min;
        bit<32> high = hdr.fingerprint.fingerprint_max;
        low = (meta.first == 0 && stored[63:32] < low) ? stored[63:32] : low;
        high = (meta.first == 0 && stored[31:0] > high) ? stored[31:0] : high;
        fingerprint_range.write(meta.slot_index, low ++ high);
        hdr.fingerprint.fingerprint_min = low;
        hdr.fingerprint.fingerprint_max = high;
    }
    action read_range() {
        bit<64> stored;
        fingerprint_range.read(stored, meta.slot_index);
        hdr.fingerprint.fingerprint_min = stored[63:32];
        hdr.fingerprint.fingerprint_max = stored[31:0];
    }

    apply {
        if (hdr.fingerprint.isValid()) {
            if (meta.duplicate == 0) {
                widen_range();
            } else {
                read_range();
            }
        }
    }
}
#endif
