/* Contributor bitmap: per pool slot one 64-bit register holding the bitmap of version 0
 * (low 32 bits) and version 1 (high 32 bits). A packet for version v sets its rank's bit in
 * v and clears it in the other version: having sent round r, the sender holds the result of
 * round r-1, so its bit there is no longer needed to recognise a retransmission, and the
 * other version is empty again by the time round r+1 starts (SwitchML's shadow-copy trick).
 *
 * In-band reset: the slot's epoch register remembers which job incarnation last used the
 * slot. A packet whose job epoch differs finds both bitmaps empty, so state a deleted job
 * left behind never leaks into a new one, without any register write from the controller
 * (bmv2's P4Runtime server cannot write registers).
 *
 * Lost state: a packet flagged CONTINUED (its sender already had a result on this slot in
 * this job) that finds another epoch proves the slot forgot the job (a switch restart, a
 * replaced pipeline). The slot is then marked lost for this epoch (epoch | EPOCH_LOST) and
 * every later packet of the job on it is answered with FLAG_STATE_LOST, so every rank
 * fails at once instead of some ranks waiting for a round whose result died. */
#ifndef P4REDUCE_CONTRIBUTOR_BITMAP_P4
#define P4REDUCE_CONTRIBUTOR_BITMAP_P4
#include "headers.p4"

control ContributorBitmap(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(POOL_SLOTS) slot_epoch;
    register<bit<64>>(POOL_SLOTS) bitmap;

    action update_bitmap() {
        bit<32> stored_epoch;
        slot_epoch.read(stored_epoch, meta.pool_slot);
        bit<1> continued = ((hdr.p4r.flags & FLAG_CONTINUED) != 0) ? 1w1 : 1w0;
        bool same_epoch = stored_epoch == hdr.p4r.epoch;
        bool lost = stored_epoch == (hdr.p4r.epoch | EPOCH_LOST)
                    || (!same_epoch && continued == 1);
        meta.state_lost = lost ? 1w1 : 1w0;
        slot_epoch.write(meta.pool_slot, lost ? (hdr.p4r.epoch | EPOCH_LOST) : hdr.p4r.epoch);
        bit<64> both;
        bitmap.read(both, meta.pool_slot);
        both = same_epoch ? both : 64w0;
        bit<32> mine = (hdr.p4r.slot_version == 0) ? both[31:0] : both[63:32];
        bit<32> other = (hdr.p4r.slot_version == 0) ? both[63:32] : both[31:0];
        bit<32> rank_bit = 32w1 << hdr.p4r.rank;
        meta.first = (mine == 0) ? 1w1 : 1w0;
        meta.duplicate = ((mine & rank_bit) != 0) ? 1w1 : 1w0;
        mine = mine | rank_bit;
        other = other & ~rank_bit;
        meta.contributors = mine;
        both = (hdr.p4r.slot_version == 0) ? (other ++ mine) : (mine ++ other);
        bitmap.write(meta.pool_slot, both);
    }

    apply {
        update_bitmap();
    }
}
#endif
