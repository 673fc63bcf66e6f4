/* Switch identity: the switch's own MAC/IP -- the address workers send p4reduce packets to,
 * the source of results, and what the ARP responder answers for. */
#ifndef P4REDUCE_IDENTITY_P4
#define P4REDUCE_IDENTITY_P4
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
#endif
