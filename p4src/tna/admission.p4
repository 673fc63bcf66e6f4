/* Admission on TNA (../v1model/admission.p4 explains it; same table, keys and action). */
#ifndef P4REDUCE_TNA_ADMISSION_P4
#define P4REDUCE_TNA_ADMISSION_P4

/* The lookup and the comparisons run for every packet that is not a harvest pass (they
 * only read the packet and the entry, so they take the first MAU stages); what they mean --
 * the counters, the register index -- only for a well-formed p4reduce packet addressed to
 * the switch (dst_diff == 0: its IPv4 destination xor the switch's). */
control Admission(inout headers_t hdr, inout metadata_t meta,
                  in ingress_intrinsic_metadata_t ig_intr_md, in bit<32> dst_diff) {
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) slot_out_of_range;
    Counter<bit<32>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS) wrong_encoding;

    action admit(bit<8> job_index, bit<16> slot_base, bit<16> slot_count,
                 bit<8> worker_count, bit<16> mcast_grp, bit<1> encoding, bit<32> bias) {
        meta.admitted = 1;
        meta.job_index = job_index;
        meta.slot_base = slot_base;
        meta.slot_count = slot_count;
        meta.worker_count = worker_count;
        meta.mcast_grp = mcast_grp;
        meta.encoding = encoding;
        meta.bias = bias;
    }
    action reject() {
        meta.admitted = 0;
    }
    table admission {
        key = {
            ig_intr_md.ingress_port: exact @name("ingress_port");
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

    /* Gateways compare fields with constants only: the comparisons of two fields are
     * computed in an action (slot < slot_count as a saturating difference, the encoding
     * flag against the job's as an xor). */
    SlotIndex() slot_index;
    /* slot_count becomes the slots left from this packet's slot on (not read afterwards):
     * the slot is in range exactly when it is not 0 */
    action compare_slot() {
        meta.slot_count = meta.slot_count |-| hdr.p4r.slot;
        meta.encoding_differs = hdr.p4r.flags[5:5] ^ meta.encoding;
        meta.pool_slot_16 = meta.slot_base + hdr.p4r.slot;
    }

    apply {
        meta.admitted = 0;
        admission.apply();
        compare_slot();
        if (hdr.p4r.isValid() && hdr.ipv4.isValid()) {
            if (dst_diff == 0) {
                if (meta.malformed == 0 && meta.admitted == 1) {
                    if (meta.encoding_differs == 1) {
                        /* FLAG_PACKED disagrees with the job: its values would be added wrongly */
                        wrong_encoding.count(meta.job_index);
                    } else if (meta.slot_count != 0) {
                        slot_index.apply(meta, hdr.p4r.slot_version);
                    } else {
                        slot_out_of_range.count(meta.job_index);
                    }
                }
            }
        }
    }
}
#endif
