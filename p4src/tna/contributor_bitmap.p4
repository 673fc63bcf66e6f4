/* Contributor bitmap on TNA (../v1model/contributor_bitmap.p4 explains it). The stateful
 * steps are the shared bodies of ../common/bodies/contributor_bitmap.p4 as RegisterActions;
 * 1 << rank comes from a constant table (a Tofino ALU shifts by constants only). The epoch
 * step returns a verdict (EPOCH_SAME, ...) that the bitmap step reads in the next stage;
 * meta.epoch_lost is computed before (p4reduce.p4), where it costs no stage. */
#ifndef P4REDUCE_TNA_CONTRIBUTOR_BITMAP_P4
#define P4REDUCE_TNA_CONTRIBUTOR_BITMAP_P4

/* 1 << rank and the job's full mask without it (the bitmap step's two inputs): they only
 * read the packet and the admission entry, so they run for every packet at the start of
 * ingress, beside admission, and the bitmap step waits for the epoch step alone. */
control RankMasks(inout headers_t hdr, inout metadata_t meta) {
    action set_rank_bit(bit<32> rank_bit) {
        meta.rank_bit = rank_bit;
    }
    table rank_bit {
        key = { hdr.p4r.rank: exact; }
        actions = { set_rank_bit; }
        const entries = { 0: set_rank_bit(32w1); 1: set_rank_bit(32w2); 2: set_rank_bit(32w4); 3: set_rank_bit(32w8); 4: set_rank_bit(32w16); 5: set_rank_bit(32w32); 6: set_rank_bit(32w64); 7: set_rank_bit(32w128); 8: set_rank_bit(32w256); 9: set_rank_bit(32w512); 10: set_rank_bit(32w1024); 11: set_rank_bit(32w2048); 12: set_rank_bit(32w4096); 13: set_rank_bit(32w8192); 14: set_rank_bit(32w16384); 15: set_rank_bit(32w32768); 16: set_rank_bit(32w65536); 17: set_rank_bit(32w131072); 18: set_rank_bit(32w262144); 19: set_rank_bit(32w524288); 20: set_rank_bit(32w1048576); 21: set_rank_bit(32w2097152); 22: set_rank_bit(32w4194304); 23: set_rank_bit(32w8388608); 24: set_rank_bit(32w16777216); 25: set_rank_bit(32w33554432); 26: set_rank_bit(32w67108864); 27: set_rank_bit(32w134217728); 28: set_rank_bit(32w268435456); 29: set_rank_bit(32w536870912); 30: set_rank_bit(32w1073741824); 31: set_rank_bit(32w2147483648); }
        size = MAX_WORKERS;
    }
    action set_others_mask() {
        meta.others_mask = meta.others_mask ^ meta.rank_bit;
    }
    action set_full_mask(bit<32> mask) {
        meta.others_mask = mask;    /* the full mask, until set_others_mask */
    }
    /* the job's full mask (one bit per rank) from worker_count: an ALU shifts by constants
     * only */
    table worker_mask {
        key = { meta.worker_count: exact; }
        actions = { set_full_mask; }
        const entries = { 1: set_full_mask(32w1); 2: set_full_mask(32w3); 3: set_full_mask(32w7); 4: set_full_mask(32w15); 5: set_full_mask(32w31); 6: set_full_mask(32w63); 7: set_full_mask(32w127); 8: set_full_mask(32w255); 9: set_full_mask(32w511); 10: set_full_mask(32w1023); 11: set_full_mask(32w2047); 12: set_full_mask(32w4095); 13: set_full_mask(32w8191); 14: set_full_mask(32w16383); 15: set_full_mask(32w32767); 16: set_full_mask(32w65535); 17: set_full_mask(32w131071); 18: set_full_mask(32w262143); 19: set_full_mask(32w524287); 20: set_full_mask(32w1048575); 21: set_full_mask(32w2097151); 22: set_full_mask(32w4194303); 23: set_full_mask(32w8388607); 24: set_full_mask(32w16777215); 25: set_full_mask(32w33554431); 26: set_full_mask(32w67108863); 27: set_full_mask(32w134217727); 28: set_full_mask(32w268435455); 29: set_full_mask(32w536870911); 30: set_full_mask(32w1073741823); 31: set_full_mask(32w2147483647); 32: set_full_mask(32w4294967295); }
        size = MAX_WORKERS;
    }

    apply {
        rank_bit.apply();
        worker_mask.apply();
        set_others_mask();
    }
}

/* Rewind: silent rounds' REWIND requests (../v1model/rewind.p4). A Tofino job runs
 * every-rank rounds only (the controller refuses silent ones), so there is no pending
 * position here and `rewinds` stays 0; the control is declared where v1model has it so
 * that the controller reads the same per-job counters by the same names on both
 * architectures. */
control Rewind() {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) rewinds;
    apply { }
}

control ContributorBitmap(inout headers_t hdr, inout metadata_t meta) {
    Rewind() rewind;
    Register<bit<32>, bit<16>>(POOL_SLOTS, 0) slot_epoch;
    Register<pair_t, bit<16>>(POOL_SLOTS, {0, 0}) bitmap;
    /* one step per FLAG_CONTINUED case, so that the ALU reads two 32-bit inputs (the
     * epoch and epoch_lost), not a third that selects between them */
    REGISTER_ACTION(bit<32>, bit<16>, slot_epoch, epoch_step, SLOT_EPOCH_BODY(hdr.p4r.epoch))
    REGISTER_ACTION(bit<32>, bit<16>, slot_epoch, continued_epoch_step,
                    SLOT_EPOCH_BODY(meta.epoch_lost))
    /* a leaf's contribution flagged STATE_LOST (the leaf restarted and lost the slot,
     * uplink.p4): the slot is lost at this level too, whatever it held (v1model's
     * ContributorBitmap.mark_lost), and Result tells every leaf */
    REGISTER_ACTION(bit<32>, bit<16>, slot_epoch, lost_epoch_step,
                    value = meta.epoch_lost; rv = EPOCH_MARKED_LOST;)
    /* one step per version and epoch case, so that the ALU reads two 32-bit inputs
     * (joining_bit, others_mask). The bit is what the winner check returned
     * (round_winner.p4): the sender's bit if the packet's block and version are those of the
     * round the slot runs, else 0 -- IN_ROUND is then false, and the step changes nothing */
#if P4REDUCE_WINNER_CHECK
    PAIR_ACTION(bit<16>, bitmap, version_0_step,
                BITMAP_BODY(lo, hi, true, meta.joining_bit != 0, meta.joining_bit))
    PAIR_ACTION(bit<16>, bitmap, version_1_step,
                BITMAP_BODY(hi, lo, true, meta.joining_bit != 0, meta.joining_bit))
    PAIR_ACTION(bit<16>, bitmap, version_0_reset,
                BITMAP_BODY(lo, hi, false, true, meta.joining_bit))
    PAIR_ACTION(bit<16>, bitmap, version_1_reset,
                BITMAP_BODY(hi, lo, false, true, meta.joining_bit))
#else
    /* no winner check (Tofino 1's test build): IN_ROUND true, the ALU reads rank_bit and
     * others_mask */
    PAIR_ACTION(bit<16>, bitmap, version_0_step, BITMAP_BODY(lo, hi, true, true, meta.rank_bit))
    PAIR_ACTION(bit<16>, bitmap, version_1_step, BITMAP_BODY(hi, lo, true, true, meta.rank_bit))
    PAIR_ACTION(bit<16>, bitmap, version_0_reset, BITMAP_BODY(lo, hi, false, true, meta.rank_bit))
    PAIR_ACTION(bit<16>, bitmap, version_1_reset, BITMAP_BODY(hi, lo, false, true, meta.rank_bit))
#endif

    action take_epoch() {
        meta.epoch_verdict = epoch_step.execute(meta.pool_slot_16);
    }
#if P4REDUCE_LEAF_ROLE
    /* the spine's RESULT or STATUS (uplink.p4) leaves the slot epoch alone, and its
     * bitmap step only reads its version's half, the round it answers: the same step as a
     * contribution's, whose bit the winner check leaves 0 for it (round_winner.p4), so
     * that nothing changes (a register takes at most 4 RegisterActions: no read step).
     * The spine's STATE_LOST marks the slot lost here too (take_lost_epoch), so a rank
     * that missed its copy meets it on its next packet to the slot (v1model marks the
     * job's incarnation too; TNA has no job_lost: docs/tofino.md) */
    action same_verdict() {
        meta.epoch_verdict = EPOCH_SAME;
    }
#define DOWNLINK_KEY meta.downlink: exact @name("downlink");
#define DOWNLINK(d) d,
#define DOWNLINK_ACTIONS same_verdict;
#define DOWNLINK_EPOCH_ENTRIES                                                         \
    (1, 0, 0, 0): same_verdict(); (1, 0, 0, 1): same_verdict();                         \
    (1, 0, 1, 0): take_lost_epoch(); (1, 0, 1, 1): take_lost_epoch();                   \
    (1, 1, 0, 0): same_verdict(); (1, 1, 0, 1): same_verdict();                         \
    (1, 1, 1, 0): take_lost_epoch(); (1, 1, 1, 1): take_lost_epoch();
#define EPOCH_STEP_SIZE 16
#else
#define EPOCH_STEP_SIZE 8
#define DOWNLINK_KEY
#define DOWNLINK(d)
#define DOWNLINK_ACTIONS
#define DOWNLINK_EPOCH_ENTRIES
#endif
    action take_continued_epoch() {
        meta.epoch_verdict = continued_epoch_step.execute(meta.pool_slot_16);
    }
    action take_lost_epoch() {
        meta.epoch_verdict = lost_epoch_step.execute(meta.pool_slot_16);
    }
    /* the step per FLAG_STATE_LOST and FLAG_CONTINUED case (tables, not ifs, so that
     * Tofino 1's production build can pin them: SLOT_EPOCH_STAGE, BITMAP_STAGE in
     * bridge.p4). A contribution of an incarnation admitted as lost (Admission's
     * admit_lost: the controller pushed the pipeline while the job existed) marks the slot
     * lost whatever its flags say, so every packet of it meets STATE_LOST on every slot:
     * v1model's job_lost for the one case that needs it after a restart, without a
     * register (docs/tofino.md, "Drops and the invariant"). */
    SLOT_EPOCH_STAGE
    table slot_epoch_step {
        key = { DOWNLINK_KEY meta.incarnation_lost: exact @name("incarnation_lost");
                hdr.p4r.flags[4:4]: exact @name("state_lost");
                hdr.p4r.flags[3:3]: exact @name("continued"); }
        actions = { take_epoch; take_continued_epoch; take_lost_epoch; DOWNLINK_ACTIONS }
        const entries = {
            DOWNLINK_EPOCH_ENTRIES
            (DOWNLINK(0) 0, 0, 0): take_epoch();
            (DOWNLINK(0) 0, 0, 1): take_continued_epoch();
            (DOWNLINK(0) 0, 1, 0): take_lost_epoch();
            (DOWNLINK(0) 0, 1, 1): take_lost_epoch();
            (DOWNLINK(0) 1, 0, 0): take_lost_epoch();
            (DOWNLINK(0) 1, 0, 1): take_lost_epoch();
            (DOWNLINK(0) 1, 1, 0): take_lost_epoch();
            (DOWNLINK(0) 1, 1, 1): take_lost_epoch();
        }
        size = EPOCH_STEP_SIZE;
    }
    action step_0() {
        meta.bitmap_before = version_0_step.execute(meta.pool_slot_16);
    }
    action step_1() {
        meta.bitmap_before = version_1_step.execute(meta.pool_slot_16);
    }
    action reset_0() {
        meta.bitmap_before = version_0_reset.execute(meta.pool_slot_16);
    }
    action reset_1() {
        meta.bitmap_before = version_1_reset.execute(meta.pool_slot_16);
    }
    /* the step per version and epoch verdict: the slot held this epoch, or it is reset */
    BITMAP_STAGE
    table bitmap_step {
        key = { meta.epoch_verdict: ternary @name("epoch_verdict");
                hdr.p4r.slot_version: exact @name("slot_version"); }
        actions = { step_0; step_1; reset_0; reset_1; }
        const entries = {
            (EPOCH_SAME, 0): step_0();
            (EPOCH_SAME, 1): step_1();
            (_, 0): reset_0();
            (_, 1): reset_1();
        }
        size = 4;
    }

    /* The epoch and bitmap steps, then only what the tables after the bitmap key on
     * (state_lost, in_round): Tofino 1 chains tables by next-table pointers, so a table
     * applied after an if waits for it -- the flags the tables do not need come after them
     * (ContributionFlags). */
    apply {
        rewind.apply();
        slot_epoch_step.apply();
        bitmap_step.apply();
#if P4REDUCE_WINNER_CHECK
        meta.in_round = 0;
        if (meta.joining_bit != 0) {
            meta.in_round = 1;
        }
#if P4REDUCE_LEAF_ROLE
        /* a cached RESULT on a leaf's round that waits for the spine goes up (Result), and
         * so does a rank's state probe (FLAG_PROBE, the bit of FLAG_CACHED from a worker:
         * ../v1model/uplink.p4 says why) whatever the round holds */
        meta.up_if_cached = 0;
        if ((meta.joining_bit != 0 || hdr.p4r.flags[2:2] == 1) && meta.has_uplink == 1) {
            meta.up_if_cached = 1;
        }
#endif
#else
        meta.in_round = 1;      /* no winner check: every new contribution joins */
#endif
        meta.same_epoch = 0;
        meta.state_lost = 0;
        if (meta.epoch_verdict == EPOCH_SAME) {
            meta.same_epoch = 1;
        } else if (meta.epoch_verdict == EPOCH_MARKED_LOST || hdr.p4r.flags[3:3] == 1) {
            meta.state_lost = 1;
        }
    }
}

/* What Result (and the lane pass) read of the bitmap's answer, after the steps that the
 * answer chooses. */
control ContributionFlags(inout headers_t hdr, inout metadata_t meta) {
    /* mine & rank_bit, computed in an action (a gateway cannot AND two fields) */
    action check_seen() {
        meta.seen = meta.bitmap_before & meta.rank_bit;
    }
    action check_complete() {
        meta.complete_diff = meta.bitmap_before ^ meta.others_mask;
    }

    apply {
        /* the bitmap step returned 0 for a slot whose epoch changed */
        meta.first = 0;
        if (meta.bitmap_before == 0) {
            meta.first = 1;
        }
        check_complete();
        meta.duplicate = 0;
        check_seen();
        if (meta.seen != 0) {
            meta.duplicate = 1;
        }
        /* a new contribution no round takes: dropped and counted (Result) */
        meta.stale = 0;
#if P4REDUCE_WINNER_CHECK
        if (meta.seen == 0 && meta.in_round == 0) {
            meta.stale = 1;
        }
#endif
    }
}
#endif
