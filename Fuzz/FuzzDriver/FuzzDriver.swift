// The libFuzzer entry every fuzz target shares. SwiftPM links an executable with
// main = <module>_main; each target's main hands control to libFuzzer's driver through
// `runLibFuzzer` (libFuzzer's own main is then not linked).

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// Runs libFuzzer with the program's arguments on `test`, one input per call.
public func runLibFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                         _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt {
    var argc = argc, argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, test)
}
