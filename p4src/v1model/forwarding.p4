/* Plain forwarding: an ARP responder for the switch's IP (identity.p4) and L2 forwarding,
 * so ARP, ping and control traffic between hosts still flow. */
#ifndef P4REDUCE_FORWARDING_P4
#define P4REDUCE_FORWARDING_P4
#include "../common/headers.p4"

control Forwarding(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    counter(1, CounterType.packets) unrouted;

    action drop() {
        unrouted.count(0);
        mark_to_drop(standard_metadata);
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
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    apply {
        if (hdr.arp.isValid() && hdr.arp.oper == 1 && meta.switch_ip != 0
                && hdr.arp.tpa == meta.switch_ip) {
            answer_arp();
        } else {
            l2_forward.apply();
        }
    }
}
#endif
