/* Register-action bodies of the contributor bitmap (docs/protocol.md section 8).
 *
 * A body is the P4 that reads one register cell (`value`), computes, writes it back and
 * returns one value (`rv`); it reads only `value` and the packet's headers and metadata, and
 * writes only `value` and `rv`. Each architecture's adapter turns it into a stateful step:
 * v1model/register_step.p4 (a read-modify-write inside an action, bmv2 and softswitch) and
 * tna/register_step.p4 (a RegisterAction, one stateful ALU on Tofino). So the packet suites
 * that run on softswitch and bmv2 exercise the very bodies the Tofino program compiles. */
#ifndef P4REDUCE_BODIES_CONTRIBUTOR_BITMAP_P4
#define P4REDUCE_BODIES_CONTRIBUTOR_BITMAP_P4

/* Slot epoch (bit<32> per pool slot). rv = what the slot held before this packet:
 * EPOCH_SAME (this packet's epoch), EPOCH_MARKED_LOST (this epoch marked lost) or
 * EPOCH_OTHER -- a verdict rather than the stored epoch, so that the bitmap step can read it
 * directly (a Tofino pipeline would spend a stage comparing two 32-bit fields). The slot
 * keeps its epoch, or its epoch marked lost; another epoch is replaced by ON_MISMATCH: this
 * packet's epoch, marked lost when the packet is CONTINUED. (v1model passes
 * meta.epoch_on_mismatch, which it computes; TNA has one step per case, hdr.p4r.epoch and
 * meta.epoch_lost, so that a stateful ALU reads two 32-bit inputs, not three.) */
#define SLOT_EPOCH_BODY(ON_MISMATCH)                                           \
    if (value == hdr.p4r.epoch) {                                              \
        rv = EPOCH_SAME;                                                       \
    } else if (value == meta.epoch_lost) {                                     \
        rv = EPOCH_MARKED_LOST;                                                \
    } else {                                                                   \
        rv = EPOCH_OTHER;                                                      \
        value = ON_MISMATCH;                                                   \
    }

/* Bitmaps of both versions of a pool slot (pair_t: lo = version 0, hi = version 1); MINE is
 * the packet's version, OTHER the other one; SAME says the slot held this packet's epoch;
 * IN_ROUND says the packet's block is the one MINE's round aggregates (the winner of the
 * round in OTHER, docs/protocol.md section 8); BIT is the sender's bit, 1 << rank (v1model
 * passes meta.rank_bit; TNA the bit its winner check returns, 0 for a packet no round takes,
 * so that the ALU reads two inputs). A half is a round's contributors, or
 * ROUND_COMPLETE once every rank (meta.others_mask | BIT: the job's full mask)
 * has contributed: the completing packet marks its half complete and empties the other one,
 * whose round every rank has left. So a round completes in this step, and its count is
 * this cell. A new contributor's bit is set only when IN_ROUND; a duplicate changes
 * nothing. rv = MINE's bits before this packet, 0 if the epoch changed (the slot then starts
 * with only this packet's bit, in its first round). */
#define BITMAP_BODY(MINE, OTHER, SAME, IN_ROUND, BIT)                          \
    rv = 0;                                                                    \
    if (SAME) {                                                                \
        rv = value.MINE;                                                       \
        if (IN_ROUND) {                                                        \
            if (value.MINE == meta.others_mask) {                              \
                value.MINE = ROUND_COMPLETE;                                   \
                value.OTHER = 0;                                               \
            } else {                                                           \
                value.MINE = value.MINE | BIT;                                 \
            }                                                                  \
        }                                                                      \
    } else {                                                                   \
        value.OTHER = 0;                                                       \
        if (meta.others_mask == 0) {                                           \
            value.MINE = ROUND_COMPLETE;                                       \
        } else {                                                               \
            value.MINE = BIT;                                                  \
        }                                                                      \
    }
#endif
