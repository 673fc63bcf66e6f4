/* Switch identity and plain forwarding: the switch's own MAC/IP (the address workers send
 * p4reduce packets to, and the source of results), an ARP responder for that IP, and L2
 * forwarding so ARP, ping and control traffic between hosts still flow. */
#ifndef P4REDUCE_FORWARDING_P4
#define P4REDUCE_FORWARDING_P4
#include "../common/headers.p4"

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
