/* Result destination on TNA (../v1model/result_destination.p4 explains it; same table).
 * The switch's source addresses are the same on every copy, so ingress writes them
 * (Result.from_switch): bridging them cost 80 bits of PHV in each gress, which the 64
 * value lanes leave no room for. */
#ifndef P4REDUCE_TNA_RESULT_DESTINATION_P4
#define P4REDUCE_TNA_RESULT_DESTINATION_P4

control ResultDestination(inout headers_t hdr, in egress_intrinsic_metadata_t eg_intr_md,
                          inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Counter<bit<32>, bit<32>>(1, CounterType_t.PACKETS) no_destination_drops;

    action set_destination(bit<48> mac, bit<32> ip, bit<16> udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
    }
    action no_destination() {
        no_destination_drops.count(0);
        eg_dprsr_md.drop_ctl = 1;
    }
    table result_destination {
        key = {
            hdr.p4r.job: exact @name("job");
            hdr.bridge.dest_rank: exact @name("rank");
        }
        actions = { set_destination; no_destination; }
        default_action = no_destination();
        size = RESULT_DESTINATION_ENTRIES;
    }

    apply {
        if (hdr.bridge.multicast == 1) {
            hdr.bridge.dest_rank = eg_intr_md.egress_rid[7:0];
        }
        hdr.p4r.rank = hdr.bridge.dest_rank;
        hdr.udp.src_port = P4REDUCE_UDP_BASE;
        result_destination.apply();
    }
}
#endif
