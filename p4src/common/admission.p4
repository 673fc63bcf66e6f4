/* Admission: only a (port, MAC, IP, job, epoch, rank) the controller installed may touch a
 * slot, and only within its job's slot range. The epoch names the job's incarnation: a
 * worker of a deleted job keeps its old epoch, so it can never touch a job created later
 * with the same id and addresses. The action hands the job's parameters to the rest of the
 * pipeline, so no later control needs a per-job table of its own. A packet whose
 * FLAG_PACKED disagrees with its job's encoding or whose FLAG_SILENT disagrees with its
 * job's round mode (the two modes never mix in a job), a DATA or SKIP whose values are not the
 * job's block size (v1model, whose parser takes every size; values.p4 says when a SKIP
 * must carry them), or a packet whose slot is outside the job's range, is dropped and
 * counted per job (wrong_encoding, slot_out_of_range).
 *
 * One table, action and counters for both architectures; how the per-job checks run is the
 * architecture's (P4REDUCE_GATEWAY_COMPARES_FIELDS): v1model folds them into the action
 * (bmv2 pays per table applied: meta.slot_in_range), TNA computes them in an action of
 * their own for every packet that is not a harvest pass (they only read the packet and the
 * entry, so they take the first MAU stages) and acts on them only for a well-formed
 * p4reduce packet addressed to the switch (dst_diff == 0: its IPv4 destination xor the
 * switch's). Pool slot and register index are 16-bit on TNA (meta.pool_slot_16,
 * slot_index_16: slot_index.p4). */
#ifndef P4REDUCE_ADMISSION_P4
#define P4REDUCE_ADMISSION_P4
#include "headers.p4"

control Admission(inout headers_t hdr, inout metadata_t meta, ADMISSION_INTRINSIC_PARAMS) {
    PACKET_COUNTER(job_index_t, MAX_JOBS, slot_out_of_range);
    PACKET_COUNTER(job_index_t, MAX_JOBS, wrong_encoding);

    action admit(job_index_t job_index, slot_t slot_base, slot_t slot_count,
                 bit<8> worker_count, group_t mcast_grp, encoding_t encoding, bit<32> bias,
                 block_values_t block_values, round_mode_t round_mode) {
        meta.admitted = 1;
        meta.job_index = job_index;
#if !P4REDUCE_GATEWAY_COMPARES_FIELDS
        meta.slot_base = slot_base;
#endif
        meta.slot_count = slot_count;
        meta.worker_count = worker_count;
        meta.mcast_grp = mcast_grp;
        meta.encoding = encoding;
        meta.bias = bias;
        meta.block_values = block_values;
        meta.round_mode = round_mode;
#if P4REDUCE_GATEWAY_COMPARES_FIELDS
        /* the per-job checks, in the action: bmv2 pays per table applied */
        /* a values block (meta.data_values, the v1model parser's) must be the job's size,
         * and a SKIP or REWIND of a job above SKIP_GROWS_TO_VALUES must carry one
         * (values.p4) -- except a closing contribution (silent, block END_OF_STREAM): a
         * closing round's RESULT carries no values, so it never grows. A rank's closing
         * SKIP is header only; so may a silent leaf's closing REWIND partial be, made
         * from its ranks' closing SKIPs (uplink.p4) */
        /* a REWIND (a SKIP's layout) belongs to silent rounds only */
        meta.slot_in_range = (hdr.p4r.slot < slot_count
                              && hdr.p4r.flags[6:5] == round_mode ++ encoding
                              && (hdr.p4r.msg_type != MSG_REWIND
                                  || round_mode == ROUND_MODE_SILENT)
                              && (meta.data_values == block_values
                                  || (meta.data_values == 0
                                      && (block_values <= SKIP_GROWS_TO_VALUES
                                          || (hdr.p4r.msg_type != MSG_SKIP
                                              && hdr.p4r.msg_type != MSG_REWIND)
                                          || ((hdr.p4r.msg_type == MSG_SKIP
                                               || hdr.p4r.msg_type == MSG_REWIND)
                                              && hdr.p4r.block == END_OF_STREAM
                                              && round_mode == ROUND_MODE_SILENT)))))
                             ? 1w1 : 1w0;
        meta.pool_slot = (bit<32>)(slot_base + hdr.p4r.slot);
        meta.slot_index = (meta.pool_slot << 1) | (bit<32>)hdr.p4r.slot_version;
#endif
    }
    /* An incarnation whose state this switch lost (its pipeline was pushed while the job
     * existed: a restart, a reset), which the controller admits again only so that its
     * ranks learn it: every packet of it is answered STATE_LOST, on every slot
     * (ContributorBitmap), whatever its flags say. Between the push and this entry the
     * job's packets are unadmitted, so no slot is ever rebuilt by a rank that had no
     * result yet (docs/protocol.md section 8). */
    action admit_lost(job_index_t job_index, slot_t slot_base, slot_t slot_count,
                      bit<8> worker_count, group_t mcast_grp, encoding_t encoding,
                      bit<32> bias, block_values_t block_values, round_mode_t round_mode) {
        admit(job_index, slot_base, slot_count, worker_count, mcast_grp, encoding, bias,
              block_values, round_mode);
        meta.incarnation_lost = 1;
    }
    action reject() {
        meta.admitted = 0;
    }
    table admission {
        key = {
            INGRESS_PORT: exact @name("ingress_port");
            hdr.ethernet.src_addr: exact @name("src_mac");
            hdr.ipv4.src_addr: exact @name("src_ip");
            hdr.p4r.job: exact @name("job");
            hdr.p4r.epoch: exact @name("epoch");
            hdr.p4r.rank: exact @name("rank");
        }
        actions = { admit; admit_lost; reject; }
        default_action = reject();
        size = ADMISSION_ENTRIES;
    }

#if P4REDUCE_GATEWAY_COMPARES_FIELDS
    apply {
        admission.apply();
        if (meta.admitted == 1 && meta.slot_in_range == 0) {
            if (hdr.p4r.slot < meta.slot_count) {
                /* FLAG_PACKED, FLAG_SILENT or the values' size disagrees with the job,
                 * or a REWIND comes for an every-rank job: its values would be added
                 * wrongly, its round taken by the other mode's rules, or its RESULT would
                 * not fit */
                COUNT(wrong_encoding, meta.job_index);
            } else {
                COUNT(slot_out_of_range, meta.job_index);
            }
        }
    }
#else
    SlotIndex() slot_index;
    /* Gateways compare fields with constants only: slot < slot_count as a saturating
     * difference (slot_count becomes the slots left from this packet's slot on, not read
     * afterwards: the slot is in range exactly when it is not 0), the encoding flag against
     * the job's as an xor. */
    action compare_slot() {
        meta.slot_count = meta.slot_count |-| hdr.p4r.slot;
        meta.encoding_differs = hdr.p4r.flags[6:5] ^ (meta.round_mode ++ meta.encoding);
        meta.pool_slot_16 = meta.slot_base + hdr.p4r.slot;
    }

    apply {
        meta.admitted = 0;
        meta.incarnation_lost = 0;
        admission.apply();
        compare_slot();
        if (hdr.p4r.isValid() && hdr.ipv4.isValid()) {
            if (dst_diff == 0) {
                if (meta.malformed == 0 && meta.admitted == 1) {
                    if (meta.encoding_differs != 0) {
                        /* FLAG_PACKED or FLAG_SILENT disagrees with the job: its values
                         * would be added wrongly, or its round taken by the other rules */
                        COUNT(wrong_encoding, meta.job_index);
                    } else if (meta.slot_count != 0) {
                        slot_index.apply(meta, hdr.p4r.slot_version);
                    } else {
                        COUNT(slot_out_of_range, meta.job_index);
                    }
                }
            }
        }
    }
#endif
}
#endif
