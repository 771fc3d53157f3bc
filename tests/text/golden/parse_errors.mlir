// RUN: quantir opt %s --split-input-file --verify-diagnostics
// Parse errors at MLIR's position with MLIR's message, and the notes MLIR attaches.

func.func @undeclared() {
  // expected-error @+1 {{use of undeclared SSA value name}}
  "test.op"(%x) : (f32) -> ()
  return
}

// -----

func.func @redefinition(%a: f32) {
  // expected-note @-1 {{previously defined here}}
  // expected-error @+1 {{redefinition of SSA value '%a'}}
  %a = "test.op"() : () -> f32
  return
}

// -----

func.func @type_of_prior_use(%a: f32) {
  // expected-note @-1 {{prior use here}}
  // expected-error @+1 {{use of value '%a' expects different type than prior uses: 'i32' vs 'f32'}}
  "test.op"(%a) : (i32) -> ()
  return
}

// -----

func.func @forward_reference_type() {
  // expected-note @+1 {{previously used here with type 'i32'}}
  "test.op"(%later) : (i32) -> ()
  // expected-error @+1 {{definition of SSA value '%later#0' has type 'f32'}}
  %later = "test.op"() : () -> f32
  return
}

// -----

// A forward reference parses; the verifier then rejects the use before the definition.
func.func @forward_reference_dominance() {
  // expected-error @+1 {{operand #0 does not dominate this use}}
  "test.op"(%later) : (f32) -> ()
  // expected-note @+1 {{operand defined here (op in the same block)}}
  %later = "test.op"() : () -> f32
  return
}

// -----

func.func @result_count() {
  // expected-error @+1 {{operation defines 1 results but was provided 2 to bind}}
  %0:2 = "test.op"() : () -> f32
  return
}

// -----

func.func @no_results() {
  // expected-error @+1 {{cannot name an operation with no results}}
  %0 = "test.op"() : () -> ()
  return
}

// -----

func.func @result_number() {
  %0:2 = "test.op"() : () -> (f32, f32)
  // expected-error @+1 {{reference to invalid result number}}
  "test.use"(%0#2) : (f32) -> ()
  return
}

// -----

func.func @operand_types() {
  %0 = "test.op"() : () -> f32
  // expected-error @+1 {{expected 2 operand types but had 1}}
  "test.use"(%0, %0) : (f32) -> ()
  return
}

// -----

func.func @not_a_function_type() {
  // expected-error @+1 {{expected function type}}
  "test.op"() : f32
  return
}

// -----

func.func @missing_colon(%a: f32) {
  // expected-error @+1 {{expected ':'}}
  %0 = quant.qcast %a f32 to !quant.uniform<i8:f32, 1.0>
  return
}

// -----

func.func @missing_to(%a: f32) {
  // expected-error @+1 {{custom op 'quant.qcast' expected 'to'}}
  %0 = quant.qcast %a : f32 into !quant.uniform<i8:f32, 1.0>
  return
}

// -----

func.func @duplicate_key() {
  // expected-error @+1 {{duplicate key 'a' in dictionary attribute}}
  "test.op"() {a = 1, a = 2} : () -> ()
  return
}

// -----

func.func @bad_escape() {
  // expected-error @+1 {{unknown escape in string literal}}
  "test.op"() {a = "\q"} : () -> ()
  return
}

// -----

func.func @integer_range() {
  // expected-error @+1 {{integer constant out of range for attribute}}
  "test.op"() {a = 256 : i8} : () -> ()
  return
}

// -----

func.func @elements_shape() {
  // expected-error @+1 {{inferred shape of elements literal ([2]) does not match type ([3])}}
  "test.op"() {a = dense<[1, 2]> : tensor<3xi32>} : () -> ()
  return
}

// -----

func.func @unknown_custom_op() {
  // expected-error @+1 {{custom op 'frobnicate' is unknown (tried 'func.frobnicate' as well)}}
  frobnicate
  return
}

// -----

func.func @unknown_dialect_custom_op(%a: f32) {
  // expected-error @+2 {{Dialect `nn' not found for custom op 'nn.relu'}}
  // expected-note @+1 {{Available dialects:}}
  %0 = nn.relu %a : f32
  return
}

// -----

func.func @return_count(%a: f32) -> f32 {
  // expected-error @+1 {{'func.return' op has 0 operands, but enclosing function (@return_count) returns 1}}
  return
}

// -----

func.func @return_type(%a: f32) -> i32 {
  // expected-error @+1 {{type of return operand 0 ('f32') doesn't match function result type ('i32') in function @return_type}}
  return %a : f32
}

// -----

// expected-error @+1 {{'func.func' op symbol declaration cannot have public visibility}}
func.func @public_declaration(f32)

// -----

// expected-error @+1 {{custom op 'func.func' expected non-empty function body}}
func.func @empty_body() {
}

// -----

func.func @twice() {
  return
}
// expected-error @+1 {{redefinition of symbol named 'twice'}}
func.func @twice() {
  return
}
// expected-note @-7 {{see existing symbol definition here}}

// -----

func.func @constant_type() {
  // expected-error @+1 {{'arith.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "arith.constant"() <{value = 1 : i32}> : () -> i64
  return
}

// -----

func.func @constant_unsigned() {
  // expected-error @+1 {{'arith.constant' op integer return type must be signless}}
  %0 = arith.constant 1 : ui8
  return
}

// -----

func.func @constant_kind() {
  // expected-error @+1 {{custom op 'arith.constant' invalid kind of attribute specified}}
  %0 = arith.constant [1]
  return
}

// -----

func.func @last_op() {
  // expected-error @+1 {{'func.return' op must be the last operation in the parent block}}
  return
  "test.op"() : () -> ()
}
