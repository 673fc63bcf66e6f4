/* Contributor bitmap (docs/protocol.md section 8), v1model. Per pool slot the job epoch that
 * last used it (slot_epoch) and one pair_t of bitmaps (lo: version 0, hi: version 1). A
 * packet for version v sets its rank's bit in v and clears it in the other version: having
 * sent round r, the sender holds the result of round r-1, so its bit there is no longer
 * needed to recognise a retransmission, and the other version is empty again by the time
 * round r+1 starts (SwitchML's shadow-copy trick).
 *
 * In-band reset: a packet whose job epoch differs from the slot's finds both bitmaps empty,
 * so state a deleted job left behind never leaks into a new one, without any register
 * write from the controller (bmv2's P4Runtime server cannot write registers).
 *
 * Rounds a contribution can join: a half is a round's contributors, or ROUND_COMPLETE once
 * every rank has joined; the completing packet empties the other half, whose round every
 * rank has left. A new bit is set only in the round the packet's block belongs to
 * (meta.in_round, NextBlock.read_winner); a stray frame -- a copy with its version
 * flipped, a very late retransmission -- finds its rank's bit set (answered, nothing
 * changes) or is dropped as stale. The round completes here: a Tofino ALU needs no
 * separate count.
 *
 * Lost state: a packet flagged CONTINUED (its sender already had a result on this slot in
 * this job) that finds another epoch proves the slot forgot the job (a switch restart, a
 * replaced pipeline). So does one that finds this epoch but no round complete in either
 * half: a rank that had no result on the slot rebuilt it after the restart, yet a round
 * of this job completed there before. The slot is then marked lost for this epoch (epoch |
 * EPOCH_LOST), and so is the job's incarnation (job_lost, per job index): every later
 * packet of the job, on this slot or any other, is answered with FLAG_STATE_LOST, so every
 * rank fails at once instead of some ranks waiting for a round whose result died -- also
 * a rank whose own slots were rebuilt, or that has none the switch forgot.
 *
 * An incarnation the controller admitted as lost (Admission's admit_lost: it re-admits
 * every job it had when it pushes the pipeline) is the same from its first packet: after
 * a restart no rank's packet, CONTINUED or not, rebuilds a slot.
 *
 * A contribution flagged STATE_LOST (a restarted leaf's, uplink.p4) marks the slot lost
 * here too, and its answer goes to the whole job (Result). So does the spine's STATE_LOST
 * passing a leaf on its way to the leaf's ranks: a rank of the leaf that missed its copy
 * (or that had ended its call and started the next) then meets STATE_LOST at its leaf,
 * instead of waiting there for ranks that stopped.
 *
 * The stateful steps are the shared bodies of common/bodies/contributor_bitmap.p4. */
#ifndef P4REDUCE_CONTRIBUTOR_BITMAP_P4
#define P4REDUCE_CONTRIBUTOR_BITMAP_P4
#include "../common/headers.p4"
#include "../common/bodies/contributor_bitmap.p4"
#include "register_step.p4"
#include "expected_ranks.p4"
#include "rewind.p4"
#include "value_aggregation.p4"

control ContributorBitmap(inout headers_t hdr, inout metadata_t meta) {
    Rewind() rewind;              /* silent rounds: the pending rewind position */
    SilentBias() silent_bias;     /* silent rounds: the bias of ranks a round does not expect */
    register<bit<32>>(POOL_SLOTS) slot_epoch;
    register<bit<64>>(POOL_SLOTS) bitmap;
    /* per job index: the epoch of its incarnation that lost state, marked lost (epoch |
     * EPOCH_LOST); another value: none of the job's slots was found lost */
    register<bit<32>>(MAX_JOBS) job_lost;

    bit<32> epoch_verdict;
    bit<32> mine;
    bit<1> continued;
    bit<1> forgot;           /* CONTINUED, yet no round of the slot complete */
/* after the bitmap step: a CONTINUED packet of this epoch finding neither half complete
 * (`stored`: the pair as read) -- no round of the slot completed since a packet without
 * CONTINUED rebuilt it, yet its sender had a result there: the slot forgot the job */
#define FORGOT                                                                 \
    forgot = ((hdr.p4r.flags & FLAG_CONTINUED) != 0 && meta.same_epoch == 1        \
              && stored.lo != ROUND_COMPLETE && stored.hi != ROUND_COMPLETE) ? 1w1 : 1w0;
    bit<1> announce_round;   /* a query is answered from an announce or rewind round */

    action check_epoch() {
        announce_round = 0;
        meta.epoch_lost = hdr.p4r.epoch | EPOCH_LOST;
        continued = ((hdr.p4r.flags & FLAG_CONTINUED) != 0) ? 1w1 : 1w0;
        meta.epoch_on_mismatch = (continued == 1) ? meta.epoch_lost : hdr.p4r.epoch;
        meta.rank_bit = 32w1 << hdr.p4r.rank;
        /* a round completes when every rank it expects has joined: the job's full mask, or
         * in a silent job the set ExpectedRanks read */
        meta.others_mask = ((meta.round_mode == ROUND_MODE_SILENT)
                            ? meta.expected
                            : JOB_FULL_MASK)
                           & ~meta.rank_bit;
        REGISTER_STEP(slot_epoch, meta.pool_slot, bit<32>, epoch_verdict, SLOT_EPOCH_BODY(meta.epoch_on_mismatch))
        /* a packet of an incarnation marked lost, or admitted as lost (Admission's
         * admit_lost), meets STATE_LOST on whichever slot */
        bit<32> lost_epoch;
        job_lost.read(lost_epoch, (bit<32>)meta.job_index);
        meta.same_epoch = (epoch_verdict == EPOCH_SAME) ? 1w1 : 1w0;
        meta.state_lost = (epoch_verdict == EPOCH_MARKED_LOST
                           || (epoch_verdict == EPOCH_OTHER && continued == 1)
                           || lost_epoch == meta.epoch_lost
                           || meta.incarnation_lost == 1) ? 1w1 : 1w0;
    }

    action contributions_seen() {
        bit<1> joined = (meta.same_epoch == 0 || meta.in_round == 1) ? 1w1 : 1w0;
        meta.duplicate = ((mine & meta.rank_bit) != 0) ? 1w1 : 1w0;
        meta.round_done = (mine == ROUND_COMPLETE) ? 1w1 : 1w0;
        meta.stale = (meta.duplicate == 0 && joined == 0) ? 1w1 : 1w0;
        joined = (meta.duplicate == 0) ? joined : 1w0;
        meta.first = (joined == 1 && mine == 0) ? 1w1 : 1w0;
        meta.complete = (joined == 1 && mine == meta.others_mask) ? 1w1 : 1w0;
        /* silent: the ranks the round does not wait for count as heard from */
        meta.contributors = mine | meta.rank_bit | meta.unexpected;
    }

    /* A query (silent: a SKIP outside the closing round) joins no round; it is answered
     * like a retransmission: the cached result of its version's round when that one is
     * complete (which may be a later round than the sender waits for: the RESULT's block
     * says which), a STATUS while it is in progress and does not wait for the sender, and
     * otherwise -- a round the sender does not know about, or one waiting for the sender,
     * which therefore missed the result that named it -- the cached result of the other
     * version's round, the last one completed. Nothing is complete: stale. */
    action answer_query() {
        bit<1> waits_for_sender = ((meta.expected & ~mine & meta.rank_bit) != 0) ? 1w1 : 1w0;
        /* the other version's half (read again: only queries and requests need it) */
        bit<64> halves;
        bitmap.read(halves, meta.pool_slot);
        bitmap_t other = (hdr.p4r.slot_version == 0) ? halves[63:32] : halves[31:0];
        meta.other_done = (other == ROUND_COMPLETE) ? 1w1 : 1w0;
        meta.first = 0;
        meta.complete = 0;
        if (mine == ROUND_COMPLETE) {
            meta.duplicate = 1;
            meta.round_done = 1;
            meta.stale = 0;
            hdr.p4r.block = (bit<32>)meta.winner_key[31:8];
        } else if (meta.block_matches == 1 && waits_for_sender == 0) {
            meta.duplicate = 1;
            meta.round_done = 0;
            meta.stale = 0;
        } else if (meta.other_done == 1) {
            meta.duplicate = 1;
            meta.round_done = 1;
            meta.stale = 0;
            hdr.p4r.slot_version = ~hdr.p4r.slot_version;
            meta.slot_index = meta.slot_index ^ 1;
            hdr.p4r.block = (bit<32>)meta.own_key[31:8];
        } else {
            meta.duplicate = 0;
            meta.round_done = 0;
            meta.stale = 1;
        }
        bit<4> kind;
        round_kind.read(kind, meta.slot_index);
        announce_round = (meta.round_done == 1
                          && kind[ROUND_KIND_ANNOUNCE:ROUND_KIND_ANNOUNCE] == 1) ? 1w1 : 1w0;
        meta.closing_answer = (meta.round_done == 1
                               && kind[ROUND_KIND_CLOSING:ROUND_KIND_CLOSING] == 1) ? 1w1 : 1w0;
        meta.ended = (meta.round_done == 1
                      && kind[ROUND_KIND_ENDED:ROUND_KIND_ENDED] == 1) ? 1w1 : 1w0;
    }
    /* an announce or rewind round's result is the fingerprint range, not values. In the
     * leaf role above SKIP_GROWS_TO_VALUES values per block the answer keeps the block
     * the packet carries after the range (its contents ignored), as long as the packet:
     * at the spine, a leaf's ANNOUNCE partial sent again (its ranks' ANNOUNCEs carry a
     * block: p4reduce.wire.announce_carries_block) gets an answer from which the leaf
     * can make its empty partial (uplink.p4); at a leaf, a partial sent up again on a
     * rank's packet keeps that length. A rank of one switch, whose link may carry no
     * longer frame than its DATA, gets the range alone as ever. */
    action serve_announce_round() {
        INVALIDATE_VALUES
        hdr.fingerprint.setValid();
    }
    action serve_announce_round_with_block() {
        hdr.fingerprint.setValid();
    }
    /* a closing round's result is header only: it ends the slot, no block has a sum */
    action serve_closing_round() {
        INVALIDATE_VALUES
    }
    /* A copy of a contribution (ANNOUNCE, DATA, closing SKIP or REWIND) whose version's
     * half is complete gets that half's cached result. In silent rounds the half may hold
     * a later round than the copy's: rounds that did not expect the sender ran in both
     * versions while its copy was on the way. So the answer says which round it is, as a
     * query's does: that round's block, and its layout (the fingerprint range of an
     * announce or rewind round, nothing of a closing round, else values). Labelled with
     * the copy's block it would hand the sender another block's sum as its own. */
    action serve_completed_round() {
        hdr.p4r.block = (bit<32>)meta.winner_key[31:8];
        bit<4> kind;
        round_kind.read(kind, meta.slot_index);
        announce_round = kind[ROUND_KIND_ANNOUNCE:ROUND_KIND_ANNOUNCE];
        meta.closing_answer = kind[ROUND_KIND_CLOSING:ROUND_KIND_CLOSING];
        meta.ended = kind[ROUND_KIND_ENDED:ROUND_KIND_ENDED];
        hdr.fingerprint.setInvalid();
    }
    /* A REWIND's position is taken unless it is a copy of the sender's closing
     * contribution (block END_OF_STREAM, its bit set); one that joins no round -- every
     * REWIND of another block, whatever the sender contributed -- is consumed. */
    action take_rewind() {
        bit<1> request = (hdr.p4r.block != END_OF_STREAM) ? 1w1 : 1w0;
        meta.rewind_taken = ~meta.duplicate | request;
        meta.rewind_only = meta.stale | request;
        meta.stale = 0;
    }
    /* A leaf's (uplink.p4): the rewind is the spine's to apply, as the winner is. A
     * request goes up at once as the leaf's own (Result), and the spine's answer comes
     * back through the leaf; only a closing REWIND that joins the leaf's closing round
     * keeps its position here, for the leaf's closing partial (a REWIND at the minimum
     * position its ranks asked for). Any other REWIND is answered as a request here and
     * keeps nothing. A request is no duplicate here even when its sender's bit is set in
     * its round's half: the spine answers it (from its last completed round), and a
     * cached answer here would carry the request's block with nobody's winner. */
    action take_rewind_at_leaf() {
        bit<1> request = (hdr.p4r.block != END_OF_STREAM) ? 1w1 : 1w0;
        meta.rewind_taken = ~meta.duplicate & ~meta.stale & ~request;
        meta.rewind_only = meta.stale | request;
        meta.relay_up = request;
        meta.duplicate = meta.duplicate & ~request;
        meta.stale = 0;
    }
    /* A leaf's, the spine's RESULT stored (RankNext has read the next round's expected
     * ranks): the round's half complete, the next one's empty -- or complete too when none
     * of the leaf's ranks is in it (the leaf's empty partial is its whole part) */
    action leaf_result_stored() {
        bitmap_t next = (meta.leaf_empty == 1) ? ROUND_COMPLETE : 0;
        bit<64> halves = (hdr.p4r.slot_version == 0) ? next ++ ROUND_COMPLETE
                                                     : ROUND_COMPLETE ++ next;
        bitmap.write(meta.pool_slot, halves);
    }
    /* ... and answered as a query would be, except that it gets no STATUS: a rank asking
     * for a rewind may have missed the result that told it the round in progress waits
     * for it (a rewind round, or its block), and the rewind applies only when that round
     * completes; the cached result of the last completed round tells it. A request
     * answered by the round that ended the slot's call is not kept: every rank held every
     * earlier sum when that round completed (a closing round waits for every rank's
     * closing contribution, an ended data round had every contribution COVERED), so its
     * cached result is all the sender lacks, and a position kept past the call's end
     * would rewind the next call's announce round to a block of this call. */
    action answer_rewind_request() {
        answer_query();
        meta.rewind_only = ~meta.round_done;
        meta.duplicate = meta.round_done;
        meta.stale = 0;
        meta.rewind_taken = (meta.ended == 1) ? 1w0 : meta.rewind_taken;
    }

    action update_version_0() {
        PAIR_STEP(bitmap, meta.pool_slot, mine,
                  BITMAP_BODY(lo, hi, meta.same_epoch == 1, meta.in_round == 1,
                              meta.rank_bit), FORGOT)
        contributions_seen();
    }
    action update_version_1() {
        PAIR_STEP(bitmap, meta.pool_slot, mine,
                  BITMAP_BODY(hi, lo, meta.same_epoch == 1, meta.in_round == 1,
                              meta.rank_bit), FORGOT)
        contributions_seen();
    }

    /* Silent: an ANNOUNCE that is not CONTINUED belongs to the job's first round on the
     * slot (RoundWinner takes it in version 0 whatever its block) only while nothing has
     * run in version 1: the first round fills version 0, and a new epoch empties version 1.
     * Once a round has run there, such an ANNOUNCE is a late copy from a rank that missed
     * the first round's result, and taking it would set the rank's bit in a round of
     * another kind that then never completes; it is stale (the rank's REWIND request gets
     * it the last completed round's result). Every-rank rounds cannot meet it: the first
     * round's next round waits for every rank. */
    action check_first_round() {
        bit<64> halves;
        bitmap.read(halves, meta.pool_slot);
        meta.in_round = (halves[63:32] == 0) ? meta.in_round : 1w0;
    }

    /* a slot found lost (check_epoch, FORGOT), or a leaf's contribution flagged
     * STATE_LOST (uplink.p4: the leaf restarted and lost the slot, so the slot is lost at
     * this level too, and every leaf is told): the slot and the job's incarnation are
     * marked lost */
    action mark_lost() {
        slot_epoch.write(meta.pool_slot, meta.epoch_lost);
        job_lost.write((bit<32>)meta.job_index, meta.epoch_lost);
        meta.state_lost = 1;
    }

    /* the epoch check and the bitmap as one action, for a packet that needs nothing in
     * between (bmv2 pays per table, and each action called from apply is one) */
    action check_and_update_version_0() {
        check_epoch();
        update_version_0();
    }
    action check_and_update_version_1() {
        check_epoch();
        update_version_1();
    }

    apply {
        if (hdr.p4r.flags[4:4] == 1 || meta.first_round == 1 || meta.store_result == 1) {
            /* a leaf's STATE_LOST, the spine's passing a leaf (no bitmap step: it is
             * nobody's contribution here), or a silent job's first ANNOUNCE
             * (ExpectedRanks: an every-rank job's first_round stays 0); or at a silent
             * leaf, the spine's RESULT stored (nothing else here: the rare tests share
             * the common case's, bmv2 and softswitch paying per test) */
            if (meta.store_result == 1) {
                leaf_result_stored();
            } else {
                check_epoch();
                if (meta.downlink == 0) {
                    if (meta.round_mode == ROUND_MODE_SILENT && meta.first_round == 1
                        && meta.same_epoch == 1) {
                        check_first_round();
                    }
                    if (hdr.p4r.slot_version == 0) {
                        update_version_0();
                    } else {
                        update_version_1();
                    }
                }
            }
        } else if (hdr.p4r.slot_version == 0) {
            check_and_update_version_0();
        } else {
            check_and_update_version_1();
        }
        /* one action on this rare path, a register read (check_epoch) and an assignment
         * (FORGOT) on every packet (bmv2 pays per primitive and per action) */
        if (meta.state_lost == 1 || forgot == 1 || hdr.p4r.flags[4:4] == 1) {
            mark_lost();
        }
        if (meta.round_mode == ROUND_MODE_SILENT && meta.store_result == 0) {
            if (meta.query == 1) {
                answer_query();
            } else if (hdr.p4r.msg_type == MSG_REWIND) {
                if (meta.has_uplink == 1) {
                    take_rewind_at_leaf();
                } else {
                    take_rewind();
                }
                if (meta.relay_up == 1) {
                    /* goes up as it is (Result) */
                } else if (meta.rewind_only == 1) {
                    answer_rewind_request();
                } else if (meta.duplicate == 1 && meta.round_done == 1) {
                    serve_completed_round();
                }
            } else if (meta.duplicate == 1 && meta.round_done == 1) {
                serve_completed_round();
            }
            if (announce_round == 1) {
                if (meta.data_values > SKIP_GROWS_TO_VALUES
                        && (meta.has_uplink == 1 || hdr.p4r.msg_type == MSG_ANNOUNCE)) {
                    serve_announce_round_with_block();
                } else {
                    serve_announce_round();
                }
            } else if (meta.closing_answer == 1) {
                serve_closing_round();
            }
            /* the rest of a silent packet's decisions, here so that an every-rank packet
             * passes one test of the round mode after the bitmap */
            if (meta.state_lost == 0) {
                rewind.apply(hdr, meta);
                silent_bias.apply(hdr, meta);
            }
        }
    }
}
#endif
