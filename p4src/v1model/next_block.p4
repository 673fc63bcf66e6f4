/* Next block and its exponent (docs/protocol.md section 11), v1model. Every packet
 * announces the sender's next non-zero block in this slot's stream and that block's biased
 * exponent. The round's result must carry the minimum announced block and the maximum
 * exponent among the senders announcing it. Both come from ONE minimum: key =
 * next_block[23:0] ++ ~next_exponent, so a smaller block wins and, for equal blocks, a
 * larger exponent (smaller complement) wins. One register, one read-modify-write per packet;
 * the stateful steps are the shared bodies of common/bodies/.
 *
 * Before the bitmap, RoundWinner reads the other version's key: once that version's round
 * is complete it is the winner, i.e. the block the packet's round aggregates, and a new
 * contribution whose block differs belongs to no round the slot can run (in_round = 0).
 * The job's first round on a slot has no earlier round to match: an ANNOUNCE that is not
 * CONTINUED belongs to it (its sender has had no result on the slot), so it is taken in
 * version 0 and stale in version 1. next_key is therefore declared outside both controls, and it is
 * the one register v1model accesses twice per packet (two cells, the first read-only).
 *
 * A job of silent rounds keeps its rounds' keys in RankNext (rank_next.p4) instead of
 * NextBlock: next_key holds a version's winner from the completion of its round on, which
 * is what RoundWinner reads in both modes. */
#ifndef P4REDUCE_NEXT_BLOCK_P4
#define P4REDUCE_NEXT_BLOCK_P4
#include "../common/headers.p4"
#include "../common/bodies/next_block.p4"
#include "../common/bodies/read.p4"
#include "register_step.p4"

register<bit<32>>(SLOT_ENTRIES) next_key;

control RoundWinner(inout headers_t hdr, inout metadata_t meta) {
    action read_winner() {
        REGISTER_STEP(next_key, meta.slot_index ^ 1, bit<32>, meta.winner_key, READ_BODY)
        /* the one place that tells the job's first round on the slot (ExpectedRanks and
         * RepairMark read it) */
        meta.job_first = (hdr.p4r.flags[3:3] == 0 && hdr.p4r.msg_type == MSG_ANNOUNCE)
                         ? 1w1 : 1w0;
        meta.in_round = ((meta.job_first == 0 || hdr.p4r.slot_version == 0)
                         && (hdr.p4r.block == (bit<32>)meta.winner_key[31:8]
                             || meta.job_first == 1))
                        ? 1w1 : 1w0;
    }

    apply {
        read_winner();
    }
}

control NextBlock(inout headers_t hdr, inout metadata_t meta) {
    action take_minimum() {
        meta.announced_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        /* an announce round whose fingerprints differ ends the call on every rank
         * (section 6): its winner is END_OF_STREAM, which the next call's announce round
         * (block END_OF_STREAM) matches, like any call's last winner */
        if (hdr.fingerprint.isValid()
            && hdr.fingerprint.fingerprint_min != hdr.fingerprint.fingerprint_max) {
            meta.announced_key = END_OF_STREAM[23:0] ++ 8w0xFF;
            meta.first = 1;
        }
        REGISTER_STEP(next_key, meta.slot_index, bit<32>, meta.next_key, NEXT_KEY_BODY(meta.announced_key))
    }
    action read_minimum() {
        REGISTER_STEP(next_key, meta.slot_index, bit<32>, meta.next_key, READ_BODY)
    }

    /* a leaf keeps the spine's winner (uplink.p4): the next round's stale check and a
     * cached answer use the job's, not the leaf's */
    action store_winner() {
        meta.next_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        next_key.write(meta.slot_index, meta.next_key);
    }

    apply {
        if (meta.store_result == 1) {
            store_winner();
        } else if (meta.duplicate == 0) {
            take_minimum();
        } else {
            read_minimum();
        }
    }
}
#endif
