/*
 * A stand-in for Windows' bcryptprimitives.dll, for Wine releases before 9
 * that lack it: the Go runtime of moonlm.dll loads it from system32 at
 * start-up for ProcessPrng, its source of random bytes, and aborts without
 * it. ProcessPrng here fills the buffer from RtlGenRandom (advapi32), which
 * those Wine releases have. Test-only: installed into the test's own Wine
 * prefix, never shipped.
 */
#include <windows.h>
#include <ntsecapi.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) {
            return FALSE;
        }
        data += n;
        len -= n;
    }
    return TRUE;
}
