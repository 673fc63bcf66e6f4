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
 * the packet's version, OTHER the other one; SAME says the slot held this packet's epoch.
 * rv = MINE's bits before this packet, 0 if the epoch changed. The sender's bit is set in
 * MINE and cleared in OTHER; a slot whose epoch changed starts with both empty. */
#define BITMAP_BODY(MINE, OTHER, SAME)                                         \
    rv = 0;                                                                    \
    if (SAME) {                                                                \
        rv = value.MINE;                                                       \
        value.MINE = value.MINE | meta.rank_bit;                               \
        value.OTHER = value.OTHER & ~meta.rank_bit;                            \
    } else {                                                                   \
        value.MINE = meta.rank_bit;                                            \
        value.OTHER = 0;                                                       \
    }
#endif
