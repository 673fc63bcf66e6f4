/* Rank next (docs/protocol.md sections 6 and 11, silent rounds), v1model. A job of silent
 * rounds keeps, per pool slot, every rank's latest announced key (`rank_next`, one cell per
 * (pool slot, rank): next_block[23:0] ++ ~next_exponent, as NextBlock's key), written by
 * every contribution of the rank on the slot -- ANNOUNCE, DATA, closing SKIP -- so a rank
 * that stays silent keeps what it announced last. The packet that completes a round reads
 * the job's cells (unrolled over MAX_WORKERS, masked by the job's full mask) and takes
 * their minimum: the winner, i.e. the next round's block and exponent, stored in next_key
 * as NextBlock stores it (RoundWinner's stale check reads it in both modes). It also stores
 * the next round's expected ranks in the other version (ExpectedRanks reads them): the
 * ranks whose cell's block is the winner's, or every rank when the winner is
 * END_OF_STREAM (the closing round, or the next call's announce round: after a closing
 * round, and after an announce round that named it, which ends the call). An announce round
 * whose fingerprints differ wins END_OF_STREAM, as in NextBlock.
 *
 * A pending rewind (Rewind: meta.rewound) replaces the winner, except where the fingerprints
 * differ (the slot ends there, whatever is pending): the next round is a rewind
 * round at the pending position, every rank expected, and the round's result and its
 * cached copies (round_kind, expected_ranks.p4) leave as MSG_REWIND.
 *
 * A spine of silent rounds (SilentSpine: meta.every_leaf) expects every leaf in every
 * round.
 *
 * A leaf of silent rounds (uplink.p4) does not choose the winner: the spine does. The
 * packet that completes a round here takes the minimum of the leaf's ranks' cells as
 * above, but stores it only as its partial's key (`partial_key`; and in next_key, so that
 * a late copy of the round before cannot join the next one, as NextBlock's running minimum
 * does for an every-rank leaf), with the round's kind as the partial's (a closing round
 * that took a REWIND sends up a REWIND at the pending position). The spine's RESULT,
 * stored here, brings the winner: it goes into next_key with the kind the result says,
 * and the walk over the leaf's cells gives the next round's expected ranks -- those
 * whose block is the winner's, every rank for END_OF_STREAM or a REWIND. When that is
 * none of them, the leaf's part of the next round is done at once (leaf_empty): its
 * partial is empty (ValueAggregation stores it, EmptyPartial sends it up) and announces
 * the leaf's minimum, which the walk gave too. */
#ifndef P4REDUCE_RANK_NEXT_P4
#define P4REDUCE_RANK_NEXT_P4
#include "../common/headers.p4"
#include "next_block.p4"
#include "expected_ranks.p4"

/* A leaf's, per (slot, version): the key of its partial of the version's round (the
 * minimum of its ranks' cells, or the pending rewind position of a REWIND partial),
 * which the partial sent again announces */
register<bit<32>>(SLOT_ENTRIES) partial_key;

/* Cell i of the slot, one action call per rank (one action folding all of them makes p4c
 * substitute the running minimum into itself, an expression doubling per rank; one action
 * called with the rank keeps a single local for every rank): a smaller key is the new
 * winner, expected alone; an equal block joins the expected ranks. The calls nest: the
 * job's ranks are 0..N-1 (full_mask's low N bits), so the first rank outside the job ends
 * the walk, and bmv2 evaluates N + 1 conditions instead of MAX_WORKERS. */
#define CALL_RANK_CELL(i)                                                      \
    if (meta.full_mask[i:i] == 1) {                                            \
        rank_cell(i);
#define END_RANK_CELL(i) }

/* A completed round's announce and closing bits (round_kind), from the packet that
 * completes it -- or, at a leaf, from the spine's RESULT of it: an announce round's
 * packets carry the fingerprint range, a closing round's the block END_OF_STREAM
 * without it. */
#define ROUND_KIND_BITS                                                        \
    bit<1> announce_round = hdr.fingerprint.isValid() ? 1w1 : 1w0;             \
    bit<1> closing_round = (hdr.p4r.block == END_OF_STREAM && announce_round == 0) \
                           ? 1w1 : 1w0;

/* Ranks that disagree on what they reduce end the slot, a pending rewind too: its
 * position is a block of some rank's stream, which the others' streams may not have (the
 * Rewind step cleared it). */
#define END_ON_DISAGREEMENT                                                    \
    if (hdr.fingerprint.isValid()                                              \
        && hdr.fingerprint.fingerprint_min != hdr.fingerprint.fingerprint_max) { \
        meta.next_key = END_OF_STREAM[23:0] ++ 8w0xFF;                         \
        meta.rewound = 0;                                                      \
    }

/* The other version keeps the earlier round's winner. The job's first round has no
 * earlier round: its block is END_OF_STREAM, which a query answered from it reads where
 * the earlier round's winner would be. */
#define KEEP_EARLIER_WINNER                                                    \
    bit<32> earlier;                                                           \
    next_key.read(earlier, meta.slot_index ^ 1);                               \
    next_key.write(meta.slot_index ^ 1,                                        \
                   (meta.first_round == 1) ? END_OF_STREAM[23:0] ++ 8w0xFF : earlier);

control RankNext(inout headers_t hdr, inout metadata_t meta) {
    register<bit<32>>(POOL_SLOTS * MAX_WORKERS) rank_next;

    action announce() {
        meta.announced_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        rank_next.write((meta.pool_slot << 5) | (bit<32>)hdr.p4r.rank, meta.announced_key);
        /* whether every contribution to the round is a DATA whose sender holds every
         * earlier result of the slot (FLAG_COVERED): the first one sets it, each other adds */
        bit<1> lacks = (hdr.p4r.msg_type != MSG_DATA || (hdr.p4r.flags & FLAG_COVERED) == 0)
                       ? 1w1 : 1w0;
        bit<1> before;
        uncovered.read(before, meta.slot_index);
        meta.uncovered = (meta.first == 1) ? lacks : (before | lacks);
        uncovered.write(meta.slot_index, meta.uncovered);
        meta.next_key = 0xFFFFFFFF;
        meta.next_expected = 0;
        meta.rank_cell_index = meta.pool_slot << 5;   /* rank 0's cell */
    }
    action rank_cell(bit<32> i) {
        /* the cell of rank i: the walk visits ranks 0, 1, ... in order (apply), so the
         * index is a field stepped once per cell -- an expression as the index would cost
         * every call site a local of its own, which bmv2 zeroes on every packet */
        bit<32> cell;
        rank_next.read(cell, meta.rank_cell_index);
        meta.rank_cell_index = meta.rank_cell_index + 1;
        if (cell < meta.next_key) {
            if (cell[31:8] != meta.next_key[31:8]) {
                meta.next_expected = 0;
            }
            meta.next_key = cell;
        }
        if (cell[31:8] == meta.next_key[31:8]) {
            meta.next_expected = meta.next_expected | (32w1 << (bit<8>)i);
        }
    }
    action store_winner() {
        END_ON_DISAGREEMENT
        if (meta.next_key[31:8] == END_OF_STREAM[23:0] || meta.every_leaf == 1) {
            meta.next_expected = meta.full_mask;
        }
        if (meta.rewound == 1) {
            meta.next_key = meta.rewind_position[23:0] ++ 8w0xFF;
            meta.next_expected = meta.full_mask;
        }
        next_key.write(meta.slot_index, meta.next_key);
        KEEP_EARLIER_WINNER
        expected.write(meta.slot_index ^ 1, meta.next_expected);
        ROUND_KIND_BITS
        /* What ends the slot's call, with END_OF_STREAM the winner (no rewind applied): a
         * closing round, or a round that every rank took part in knowing every earlier
         * result -- a call's announce round (block END_OF_STREAM; a rewind round's is its
         * position), or a data round that expected every rank, each contribution COVERED.
         * The round after it cannot reuse this version before every rank has its result. */
        bit<1> eos_next = (meta.next_key[31:8] == END_OF_STREAM[23:0] && meta.rewound == 0)
                          ? 1w1 : 1w0;
        bit<1> call_announce = (announce_round == 1 && hdr.p4r.block == END_OF_STREAM)
                               ? 1w1 : 1w0;
        bit<1> covered_data = (announce_round == 0 && hdr.p4r.block != END_OF_STREAM
                               && meta.expected == meta.full_mask && meta.uncovered == 0)
                              ? 1w1 : 1w0;
        meta.ended = (eos_next == 1
                      && (closing_round == 1 || call_announce == 1 || covered_data == 1))
                     ? 1w1 : 1w0;
        round_kind.write(meta.slot_index,
                         meta.ended ++ closing_round ++ announce_round ++ meta.rewound);
    }
    action read_stored() {
        next_key.read(meta.next_key, meta.slot_index);
        bit<4> kind;
        round_kind.read(kind, meta.slot_index);
        meta.rewound = kind[ROUND_KIND_REWOUND:ROUND_KIND_REWOUND];
    }

    /* A leaf's round complete here: its partial's key and kind (the spine's RESULT
     * replaces both); the round's winner is the spine's to choose. */
    action store_partial() {
        END_ON_DISAGREEMENT   /* at a leaf, the spine ends the slot */
        if (meta.rewound == 1) {
            meta.next_key = meta.rewind_position[23:0] ++ 8w0xFF;
        }
        next_key.write(meta.slot_index, meta.next_key);
        partial_key.write(meta.slot_index, meta.next_key);
        KEEP_EARLIER_WINNER
        ROUND_KIND_BITS
        round_kind.write(meta.slot_index, 1w0 ++ closing_round ++ announce_round ++ meta.rewound);
        meta.partial_covered = (meta.uncovered == 0 && meta.expected == meta.full_mask)
                               ? 1w1 : 1w0;
    }
    /* ... sent again (LeafRound: the spine's result is not held) */
    action read_partial() {
        partial_key.read(meta.next_key, meta.slot_index);
        bit<4> kind;
        round_kind.read(kind, meta.slot_index);
        meta.rewound = kind[ROUND_KIND_REWOUND:ROUND_KIND_REWOUND];
        bit<1> lacks;
        uncovered.read(lacks, meta.slot_index);
        bitmap_t took_part;
        expected.read(took_part, meta.slot_index);
        meta.partial_covered = (lacks == 0
                                && took_part == JOB_FULL_MASK)
                               ? 1w1 : 1w0;
    }

    /* The spine's RESULT (or REWIND) of the leaf's round, stored: its winner and kind,
     * and the walk's start (the leaf's ranks, as announce() starts it) */
    action take_winner() {
        meta.full_mask = JOB_FULL_MASK;
        meta.winner_key = hdr.p4r.next_block[23:0] ++ (~hdr.p4r.next_exponent);
        next_key.write(meta.slot_index, meta.winner_key);
        meta.rewound = (hdr.p4r.msg_type == MSG_REWIND) ? 1w1 : 1w0;
        ROUND_KIND_BITS
        bit<1> ended = ((hdr.p4r.flags & FLAG_ENDED) != 0) ? 1w1 : 1w0;
        round_kind.write(meta.slot_index, ended ++ closing_round ++ announce_round ++ meta.rewound);
        meta.next_key = 0xFFFFFFFF;
        meta.next_expected = 0;
        meta.rank_cell_index = meta.pool_slot << 5;
    }
    /* ... and the next round's expected ranks here, from the walk: the leaf's minimum is
     * at least the winner (the spine took it among the leaves' minima, and no rank of
     * this leaf has sent since), and its ranks at the minimum are expected when it is the
     * winner. None expected: the next round's partial is the empty one, announcing the
     * minimum; it is made now, so it is stored as sent (not COVERED: no rank took part). */
    action expect_next() {
        bit<1> all = (meta.winner_key[31:8] == END_OF_STREAM[23:0] || meta.rewound == 1)
                     ? 1w1 : 1w0;
        bitmap_t mask = (meta.next_key[31:8] == meta.winner_key[31:8]) ? meta.next_expected : 0;
        mask = (all == 1) ? meta.full_mask : mask;
        expected.write(meta.slot_index ^ 1, mask);
        meta.leaf_empty = (mask == 0) ? 1w1 : 1w0;
        meta.partial_key = meta.next_key;
        partial_key.write(meta.slot_index ^ 1, meta.next_key);
        round_kind.write(meta.slot_index ^ 1, 0);
        uncovered.write(meta.slot_index ^ 1, 1);
        meta.next_key = meta.winner_key;   /* what the RESULT passed down names */
    }

    apply {
        /* (a spine's RESULT at a leaf is no duplicate: tested after the common case) */
        if (meta.duplicate == 0 && meta.store_result == 0) {
            announce();
            if (meta.complete == 1) {
                FOR_EACH_RANK(CALL_RANK_CELL)
                FOR_EACH_RANK(END_RANK_CELL)
                if (meta.has_uplink == 1) {
                    store_partial();
                } else {
                    store_winner();
                }
            }
        } else if (meta.store_result == 1) {
            take_winner();
            FOR_EACH_RANK(CALL_RANK_CELL)
            FOR_EACH_RANK(END_RANK_CELL)
            expect_next();
        } else if (meta.send_up == 1) {
            read_partial();
        } else {
            read_stored();
        }
    }
}
#endif
