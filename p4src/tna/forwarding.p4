/* Switch identity, ARP responder and L2 forwarding on TNA (the v1model counterpart is
 * ../v1model/forwarding.p4; table, action and counter names are the same). */
#ifndef P4REDUCE_TNA_FORWARDING_P4
#define P4REDUCE_TNA_FORWARDING_P4

control SwitchIdentity(inout headers_t hdr, inout metadata_t meta) {
    action set_identity(bit<48> mac, bit<32> ip) {
        meta.switch_mac = mac;
        meta.switch_ip = ip;
    }
    table switch_identity {
        actions = { set_identity; }
        default_action = set_identity(0, 0);
    }
    apply {
        switch_identity.apply();
    }
}

control Forwarding(inout headers_t hdr, inout metadata_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<32>, bit<32>>(1, CounterType_t.PACKETS) unrouted;

    action forward(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }
    action flood(MulticastGroupId_t group) {
        ig_tm_md.mcast_grp_a = group;
        meta.multicast = 1;      /* egress prunes the copy for the ingress port */
    }
    action drop() {
        unrouted.count(0);
        ig_dprsr_md.drop_ctl = 1;
    }
    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact @name("dst_mac"); }
        actions = { forward; flood; drop; }
        default_action = drop();
        size = L2_ENTRIES;
    }

    action answer_arp() {
        hdr.ethernet.dst_addr = hdr.arp.sha;
        hdr.ethernet.src_addr = meta.switch_mac;
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.sha = meta.switch_mac;
        hdr.arp.spa = meta.switch_ip;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }

    /* A Tofino gateway compares a field with a constant and reads at most 4 bytes (+12
     * bits): two 32-bit fields are compared through their xor, computed in an action. */
    bit<32> tpa_diff;
    action compare_tpa() {
        tpa_diff = hdr.arp.tpa ^ meta.switch_ip;
    }

    bit<1> for_me;

    apply {
        compare_tpa();
        for_me = 0;
        if (hdr.arp.isValid() && hdr.arp.oper == 1) {    /* one gateway each: <= 4 bytes */
            if (tpa_diff == 0) {
                if (meta.switch_ip != 0) {
                    for_me = 1;
                }
            }
        }
        if (for_me == 1) {
            answer_arp();
        } else {
            l2_forward.apply();
        }
    }
}
#endif
