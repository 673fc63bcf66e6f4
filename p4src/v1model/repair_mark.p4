/* Repair mark (docs/protocol.md section 13), v1model: whether a round's time includes a
 * repair. Per pool slot one bit, set by every packet flagged RETRANSMIT on the slot -- a
 * lost contribution sent again, a rank asking after a lost result (the round after it
 * then waits for that rank's late packet), a rank asking while the round waits -- and
 * read and cleared by the packet that completes a round, whose RESULT then carries
 * FLAG_REPAIRED (so does a round completed by a retransmission). Why: a rank that sent
 * nothing again sees such a round as clean, yet it lasted another rank's timer; taken
 * as a round time it raised that rank's timers, which lengthened the next repairs (one
 * slot of 8 ranks at 10 % loss each way: calls of 15 s). The workers take a repaired
 * round as at most their estimate (hostlib.timers). The mark is advice for timers only:
 * no sum depends on it. */
#ifndef P4REDUCE_REPAIR_MARK_P4
#define P4REDUCE_REPAIR_MARK_P4
#include "../common/headers.p4"
#include "register_step.p4"

register<bit<1>>(POOL_SLOTS) retransmission_seen;

/* switch -> worker, on a RESULT (CONTINUED's bit, a worker's flag): a packet of the
 * round, or a request after the round before it, was a retransmission
 * (p4reduce.wire.Flag.REPAIRED) */
const flags_t FLAG_REPAIRED = 0x08;

/* Applied to every admitted contribution, after the bitmap (meta.complete). A job's first
 * ANNOUNCE on a slot (RoundWinner's job_first), sent once, clears the mark first: the pool
 * slot may hold one that an earlier job's last round left. */
control RepairMark(inout headers_t hdr, inout metadata_t meta) {
    action round_completed() {
        REGISTER_STEP(retransmission_seen, meta.pool_slot, bit<1>, meta.repaired,
                      rv = value; value = 0;)
        if ((hdr.p4r.flags & FLAG_RETRANSMIT) != 0) {
            meta.repaired = 1;
        }
    }
    action retransmission() {
        retransmission_seen.write(meta.pool_slot, 1);
    }
    action clear() {
        retransmission_seen.write(meta.pool_slot, 0);
    }

    apply {
        if (meta.job_first == 1 && (hdr.p4r.flags & FLAG_RETRANSMIT) == 0) {
            clear();   /* (meta.repaired stays 0 if it completes the round) */
        } else if (meta.complete == 1) {
            round_completed();
        } else if ((hdr.p4r.flags & FLAG_RETRANSMIT) != 0) {
            retransmission();
        }
    }
}
#endif
