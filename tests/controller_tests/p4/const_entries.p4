/* p4reduce's v1model program with one more table, `port_class`, whose entries are const
 * (fixed by the program; P4Runtime can read them, never write them), as the TNA program's
 * rank_bit, bridge_flags and pair_* tables are. The controller's tests load it into a real
 * switch: `p4reduce-ctl up` and its reconcile must leave const entries alone
 * (tests/controller_tests/test_const_tables.py). The table only counts each frame under
 * its port's class (counter `port_classes`: the const entries at work, observable), so
 * p4reduce's packets behave exactly as in p4src/v1model/p4reduce.p4. */
#define main p4reduce_main
#include "../../../p4src/v1model/p4reduce.p4"
#undef main

control ConstEntriesIngress(inout headers_t hdr, inout metadata_t meta,
                            inout standard_metadata_t standard_metadata) {
    P4ReduceIngress() p4reduce;
    counter(4, CounterType.packets) port_classes;

    action count_class(bit<32> class) {
        port_classes.count(class);
    }
    table port_class {
        key = { standard_metadata.ingress_port: exact; }
        actions = { count_class; NoAction; }
        const default_action = NoAction();
        const entries = {
            1 : count_class(1);
            2 : count_class(2);
            3 : count_class(3);
        }
    }
    apply {
        port_class.apply();
        p4reduce.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(P4ReduceParser(),
         P4ReduceVerifyChecksum(),
         ConstEntriesIngress(),
         P4ReduceEgress(),
         P4ReduceComputeChecksum(),
         P4ReduceDeparser()) main;
