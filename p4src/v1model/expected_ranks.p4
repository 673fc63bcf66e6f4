/* Expected ranks (docs/protocol.md section 6, silent rounds), v1model. In a job of silent
 * rounds only the ranks whose next non-zero block is a round's block send in it; the
 * packet that completes a round stores that set for the next round (RankNext: `expected`,
 * per (slot, version), written into the other version). Before the bitmap, ExpectedRanks
 * reads the set of the packet's round: the round completes when its contributors are that
 * set (ContributorBitmap compares with it instead of the job's full mask), and a rank
 * outside it joins nothing. The job's first round on a slot (an ANNOUNCE that is not
 * CONTINUED) expects every rank: the slot may hold another job's set.
 *
 * It also sorts out the two silent-mode packets that join no round: a SKIP whose block is
 * not END_OF_STREAM is a query (a silent rank waiting for a result; ContributorBitmap
 * answers it), a REWIND whose block is not END_OF_STREAM a request only (Rewind). A SKIP
 * or REWIND of block END_OF_STREAM is a closing contribution. And it reads the key the
 * packet's own version stored (`own_key`): while that version's round is in progress it is
 * the block of the other version's round, which a query may be answered with. */
#ifndef P4REDUCE_EXPECTED_RANKS_P4
#define P4REDUCE_EXPECTED_RANKS_P4
#include "../common/headers.p4"
#include "next_block.p4"

register<bit<32>>(SLOT_ENTRIES) expected;
/* What a completed round of a silent job was, per (slot, version), written at its
 * completion (RankNext): bit 0 its result applied a rewind (it and its copies leave as
 * MSG_REWIND), bit 1 it was an announce or rewind round (its result carries the
 * fingerprint range, not values). A query answered from it needs both. */
register<bit<2>>(SLOT_ENTRIES) round_kind;
#define ROUND_KIND_REWOUND 0
#define ROUND_KIND_ANNOUNCE 1

control ExpectedRanks(inout headers_t hdr, inout metadata_t meta) {
    action read_expected() {
        meta.full_mask = (((bit<64>)1 << meta.worker_count) - 1)[31:0];
        meta.first_round = (hdr.p4r.flags[3:3] == 0 && hdr.p4r.msg_type == MSG_ANNOUNCE)
                           ? 1w1 : 1w0;
        bitmap_t stored;
        expected.read(stored, meta.slot_index);
        meta.expected = (meta.first_round == 1) ? meta.full_mask : stored;
        meta.unexpected = meta.full_mask & ~meta.expected;
        next_key.read(meta.own_key, meta.slot_index);
        meta.block_matches = meta.in_round;
        meta.query = (hdr.p4r.msg_type == MSG_SKIP && hdr.p4r.block != END_OF_STREAM)
                     ? 1w1 : 1w0;
        bit<1> request = (hdr.p4r.msg_type == MSG_REWIND
                          && hdr.p4r.block != END_OF_STREAM) ? 1w1 : 1w0;
        meta.in_round = (meta.in_round == 1 && meta.query == 0 && request == 0
                         && (meta.expected & (32w1 << hdr.p4r.rank)) != 0) ? 1w1 : 1w0;
    }

    apply {
        read_expected();
    }
}
#endif
