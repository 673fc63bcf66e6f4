/* TNA adapter for the shared register-action bodies (common/bodies/): a stateful step is a
 * RegisterAction -- one stateful ALU of a Tofino pipeline -- whose apply() is the body. The
 * body reads the cell (`value`) and the packet's headers and metadata, and writes only
 * `value` and `rv`, which is what a RegisterAction allows. */
#ifndef P4REDUCE_TNA_REGISTER_STEP_P4
#define P4REDUCE_TNA_REGISTER_STEP_P4

#define REGISTER_ACTION(T, I, REG, NAME, BODY)                                 \
    RegisterAction<T, I, T>(REG) NAME = {                                      \
        void apply(inout T value, out T rv) {                                  \
            BODY                                                               \
        }                                                                      \
    };

#define PAIR_ACTION(I, REG, NAME, BODY)                                        \
    RegisterAction<pair_t, I, bit<32>>(REG) NAME = {                           \
        void apply(inout pair_t value, out bit<32> rv) {                       \
            BODY                                                               \
        }                                                                      \
    };
#endif
