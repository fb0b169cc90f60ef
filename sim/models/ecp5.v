// Behavioural models of the ECP5 cells that atomcube's blocks instantiate on an ECP5 platform
// (hw/fabric.py: Ecp5Globals, Ecp5Copies), so that a block can be simulated as a board builds
// it: the `-ecp5` cases of sim/benches.py. Each model covers the configurations hw/fabric.py
// uses and stops the simulation, naming the parameter, on any other.
//
// These are our reading of Lattice's descriptions of the cells (FPGA Libraries Reference Guide,
// ECP5 sysDSP Usage Guide), not vendor models: a simulation with them checks that our blocks
// wire the cells as we mean them (bit order, sign extension, latency, enables, resets), not
// that the silicon does what we read.

// DCCA: a global clock buffer with a clock enable; the ECP5 board tops put high fan-out
// enables and resets through one (hw.fabric.global_buffer)
module DCCA(input CLKI, input CE, output CLKO);
    assign CLKO = CLKI & CE;
endmodule

// TRELLIS_FF: a slice flip-flop (hw.fabric.register_copies: CLKMUX CLK, LSRMUX LSR, a set or
// reset value, synchronous or asynchronous set/reset, clock enable tied or CE)
module TRELLIS_FF(input CLK, input LSR, input CE, input DI, output reg Q);
    parameter GSR = "ENABLED";
    parameter CEMUX = "1";
    parameter CLKMUX = "CLK";
    parameter LSRMUX = "LSR";
    parameter SRMODE = "LSR_OVER_CE";
    parameter REGSET = "RESET";
    wire srval = (REGSET == "SET");
    wire ce = (CEMUX == "1") ? 1'b1 : CE;
    initial begin
        Q = srval;
        if (CLKMUX != "CLK" || LSRMUX != "LSR" || (CEMUX != "1" && CEMUX != "CE") ||
            (SRMODE != "LSR_OVER_CE" && SRMODE != "ASYNC") ||
            (REGSET != "SET" && REGSET != "RESET")) begin
            $display("sim/models/ecp5.v: TRELLIS_FF %m: a CLKMUX, LSRMUX, CEMUX, SRMODE or REGSET this model does not cover");
            $finish;
        end
    end
    generate
        if (SRMODE == "ASYNC") begin : async_sr
            always @(posedge CLK or posedge LSR)
                if (LSR) Q <= srval;
                else if (ce) Q <= DI;
        end else begin : sync_sr
            always @(posedge CLK)
                if (LSR) Q <= srval;
                else if (ce) Q <= DI;
        end
    endgenerate
endmodule

// MULT18X18D: an 18 x 18 multiplier block (hw.fabric.registered_product), with its input
// registers (A with SIGNEDA, B with SIGNEDB) and its output register each either off ("NONE")
// or on CLK0, enabled by CE0 and cleared by RST0 (synchronous, before the enable). SIGNEDA and
// SIGNEDB say whether the 18-bit operands are two's complement. Not covered: the pipeline
// register, the C input, the shift-register (SOURCEA/B = 1) and cascade paths, CLK1-3.
module MULT18X18D(
    input A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0,
    input B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input CLK0, CE0, RST0,
    output P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter GSR = "ENABLED";
    parameter RESETMODE = "SYNC";

    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_r = 0, b_r = 0;
    reg sa_r = 0, sb_r = 0;
    reg [35:0] p_r = 0;
    initial
        if ((REG_INPUTA_CLK != "NONE" && REG_INPUTA_CLK != "CLK0") ||
            (REG_INPUTB_CLK != "NONE" && REG_INPUTB_CLK != "CLK0") ||
            (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0") ||
            REG_PIPELINE_CLK != "NONE" || REG_INPUTA_CE != "CE0" || REG_INPUTB_CE != "CE0" ||
            REG_OUTPUT_CE != "CE0" || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0" ||
            REG_OUTPUT_RST != "RST0" || RESETMODE != "SYNC") begin
            $display("sim/models/ecp5.v: MULT18X18D %m: a register clock, enable, reset or RESETMODE this model does not cover");
            $finish;
        end
    wire [17:0] a_in = (REG_INPUTA_CLK == "CLK0") ? a_r : a;
    wire [17:0] b_in = (REG_INPUTB_CLK == "CLK0") ? b_r : b;
    wire sa = (REG_INPUTA_CLK == "CLK0") ? sa_r : SIGNEDA;
    wire sb = (REG_INPUTB_CLK == "CLK0") ? sb_r : SIGNEDB;
    // the operands extended to 36 bits by their signedness: the low 36 bits of the product of
    // the extended values are the product, signed or not
    wire [35:0] a_x = {{18{sa & a_in[17]}}, a_in};
    wire [35:0] b_x = {{18{sb & b_in[17]}}, b_in};
    wire [35:0] product = a_x * b_x;
    // the three registers share CLK0, CE0 and RST0 (the only configuration covered)
    always @(posedge CLK0)
        if (RST0) begin
            a_r <= 0; sa_r <= 0; b_r <= 0; sb_r <= 0; p_r <= 0;
        end else if (CE0) begin
            a_r <= a; sa_r <= SIGNEDA; b_r <= b; sb_r <= SIGNEDB; p_r <= product;
        end
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = (REG_OUTPUT_CLK == "CLK0") ? p_r : product;
endmodule
