'use strict';
// Session.checkpoints(): the checkpoints of a hybrid model's recurrent state.
// A hybrid model (recurrent layers beside attention: qwen35, qwen35moe,
// qwen3next) cannot cut that state back to a position, so a session keeps
// copies of it: at the end of every prefill and every checkpointEvery
// decoded positions (a session option), within checkpointBytes of memory.
// rewind() restores the last one at or before the position and evaluates
// the tokens after it again. index.js calls install() with its internals.

let I = null; // index.js internals: koffi, lib, check, Status, MoonlmError, Session
let F = null; // the checkpoint functions of the library, declared on first use

function funcs() {
  if (F) return F;
  const { file, t } = I.lib();
  const dll = I.koffi.load(file); // the same library again (dlopen counts references)
  const info = I.koffi.struct({
    size: 'size_t', every: 'int32_t', max_count: 'int32_t', n_held: 'int32_t', reserved: 'uint32_t',
    bytes_held: 'uint64_t',
  });
  try {
    F = {
      info,
      get: dll.func('moonlm_session_checkpoints', 'int', [t.session, I.koffi.inout(I.koffi.pointer(info))]),
      positions: dll.func('moonlm_session_checkpoint_positions', 'int',
        [t.session, 'size_t *', 'size_t', I.koffi.out(I.koffi.pointer('size_t'))]),
    };
  } catch (e) {
    throw new I.MoonlmError(I.Status.UNSUPPORTED,
      `checkpoints: ${I.lib().file} predates the checkpoint functions; rebuild the library`, { cause: e });
  }
  return F;
}

const sessionMethods = {
  /**
   * The session's checkpoints: { every, maxCount, bytesHeld, positions }, the
   * settings in effect and the positions held (ascending; a rewind to one
   * evaluates nothing). All zero and empty for a model without recurrent
   * layers. Synchronous.
   */
  checkpoints() {
    const f = funcs();
    const h = this._handle('checkpoints');
    const info = { size: I.koffi.sizeof(f.info) };
    I.check(f.get(h, info), 'checkpoints');
    const n = [0];
    const buf = new BigUint64Array(Math.max(info.n_held, 1));
    I.check(f.positions(h, buf, buf.length, n), 'checkpoints');
    return {
      every: info.every,
      maxCount: info.max_count,
      bytesHeld: Number(info.bytes_held),
      positions: Array.from(buf.subarray(0, Number(n[0])), Number),
    };
  },
};

function install(internals) {
  I = internals;
  for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(sessionMethods))) {
    Object.defineProperty(I.Session.prototype, name, { ...d, enumerable: false });
  }
}

module.exports = { install };
