'use strict';
// One event's listeners (onData, onExit, ...), each disposable.

class Listeners {
  constructor() { this._list = []; }
  get size() { return this._list.length; }
  add(fn, owner) {
    if (typeof fn !== 'function') throw new TypeError('listener must be a function');
    const entry = { fn };
    this._list.push(entry);
    return {
      dispose: () => {
        const i = this._list.indexOf(entry);
        if (i >= 0) {
          this._list.splice(i, 1);
          if (owner) owner();
        }
      },
    };
  }
  // A listener's exception never unwinds into the module (the decoder, the
  // delivery loop, the order of onError and onExit): it is rethrown on the
  // next tick, where it is an uncaught exception like one from an
  // EventEmitter listener, and the remaining listeners still run.
  emit(value) {
    for (const { fn } of this._list.slice()) {
      try {
        fn(value);
      } catch (e) {
        process.nextTick(() => { throw e; });
      }
    }
  }
}


module.exports = { Listeners };
