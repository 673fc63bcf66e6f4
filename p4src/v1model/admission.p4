/* Admission: only a (port, MAC, IP, job, epoch, rank) the controller installed may touch a
 * slot, and only within its job's slot range. The epoch names the job's incarnation: a
 * worker of a deleted job keeps its old epoch, so it can never touch a job created later
 * with the same id and addresses. The action hands the job's parameters to the rest of the
 * pipeline, so no later control needs a per-job table of its own. A packet whose
 * FLAG_PACKED disagrees with its job's encoding, or whose slot is outside the job's range,
 * is dropped and counted per job (slot_in_range stays 0). */
#ifndef P4REDUCE_ADMISSION_P4
#define P4REDUCE_ADMISSION_P4
#include "../common/headers.p4"

control Admission(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(MAX_JOBS, CounterType.packets) slot_out_of_range;
    counter(MAX_JOBS, CounterType.packets) wrong_encoding;

    action admit(bit<8> job_index, bit<16> slot_base, bit<16> slot_count,
                 bit<8> worker_count, bit<16> mcast_grp, bit<1> encoding, bit<32> bias) {
        meta.admitted = 1;
        meta.job_index = job_index;
        meta.slot_count = slot_count;
        meta.worker_count = worker_count;
        meta.mcast_grp = mcast_grp;
        meta.encoding = encoding;
        meta.bias = bias;
        /* the per-job checks, in the action: bmv2 pays per table applied */
        meta.slot_in_range = (hdr.p4r.slot < slot_count && hdr.p4r.flags[5:5] == encoding)
                             ? 1w1 : 1w0;
        meta.pool_slot = (bit<32>)(slot_base + hdr.p4r.slot);
        meta.slot_index = (meta.pool_slot << 1) | (bit<32>)hdr.p4r.slot_version;
    }
    action reject() {
        meta.admitted = 0;
    }
    table admission {
        key = {
            standard_metadata.ingress_port: exact @name("ingress_port");
            hdr.ethernet.src_addr: exact @name("src_mac");
            hdr.ipv4.src_addr: exact @name("src_ip");
            hdr.p4r.job: exact @name("job");
            hdr.p4r.epoch: exact @name("epoch");
            hdr.p4r.rank: exact @name("rank");
        }
        actions = { admit; reject; }
        default_action = reject();
        size = ADMISSION_ENTRIES;
    }

    apply {
        admission.apply();
        if (meta.admitted == 1 && meta.slot_in_range == 0) {
            if (hdr.p4r.flags[5:5] != meta.encoding) {
                /* FLAG_PACKED disagrees with the job: its values would be added wrongly */
                wrong_encoding.count((bit<32>)meta.job_index);
            } else {
                slot_out_of_range.count((bit<32>)meta.job_index);
            }
        }
    }
}
#endif
