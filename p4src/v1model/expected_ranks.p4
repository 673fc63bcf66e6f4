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
 * fingerprint range, not values), bit 2 it was a closing round (its result is header
 * only), bit 3 it ended the slot's call (RankNext: a closing round; a call's announce round
 * that named END_OF_STREAM; a data round that named it, expected every rank and whose
 * every contribution was COVERED): no closing round follows, its RESULT and cached copies
 * carry FLAG_ENDED. A query or copy answered from it needs the first four; the round
 * after it, the fourth. */
register<bit<4>>(SLOT_ENTRIES) round_kind;
#define ROUND_KIND_REWOUND 0
#define ROUND_KIND_ANNOUNCE 1
#define ROUND_KIND_CLOSING 2
#define ROUND_KIND_ENDED 3
/* The job's ranks as a bitmap: its low worker_count bits (the rank walk's and every
 * round's full mask) */
#define JOB_FULL_MASK (((bit<64>)1 << meta.worker_count) - 1)[31:0]
/* Per (slot, version): a contribution to the round lacked FLAG_COVERED (RankNext). */
register<bit<1>>(SLOT_ENTRIES) uncovered;

control ExpectedRanks(inout headers_t hdr, inout metadata_t meta) {
    action read_expected() {
        meta.full_mask = JOB_FULL_MASK;
        meta.first_round = meta.job_first;   /* RoundWinner's */
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
        /* A contribution joins only a round of its kind. The round before says which
         * kind the packet's round is: a rewind round if its result applied a rewind;
         * else, of block END_OF_STREAM, a closing round unless the round before ended the
         * call (then it is the next call's announce round); else a data round. Only ANNOUNCEs
         * join announce and rewind rounds, only DATA data rounds, only SKIPs and REWINDs
         * closing rounds. A copy of another kind whose block is the round's -- a DATA
         * resent into a rewind round at its own block, an ANNOUNCE into a data round at
         * the rewind position -- would set its sender's bit and add to a round it is no
         * part of. */
        bit<4> before;
        round_kind.read(before, meta.slot_index ^ 1);
        bit<1> closing = (meta.winner_key[31:8] == END_OF_STREAM[23:0]
                          && before[ROUND_KIND_ENDED:ROUND_KIND_ENDED] == 0) ? 1w1 : 1w0;
        bit<1> announce_kind = (before[ROUND_KIND_REWOUND:ROUND_KIND_REWOUND] == 1
                                || (meta.winner_key[31:8] == END_OF_STREAM[23:0]
                                    && closing == 0)) ? 1w1 : 1w0;
        bit<1> announce = (hdr.p4r.msg_type == MSG_ANNOUNCE) ? 1w1 : 1w0;
        bit<1> other_kind = (meta.first_round == 0 && announce != announce_kind) ? 1w1 : 1w0;
        meta.in_round = (meta.in_round == 1 && meta.query == 0 && request == 0
                         && other_kind == 0
                         && (meta.expected & (32w1 << hdr.p4r.rank)) != 0) ? 1w1 : 1w0;
    }

    apply {
        read_expected();
    }
}
#endif
