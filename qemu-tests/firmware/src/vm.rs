//! The runtime being profiled: a small stack machine running a program of named functions
//! with calls, loops and recursion, each instruction with a source line, so a profile of it
//! has what a profile of a real interpreter has (functions, a file, lines).
//!
//! The call stack the sampler reads is published in atomics as it changes: a frame's slot is
//! written before the depth that exposes it, and a line change is one store, so an interrupt
//! between any two instructions sees a whole stack.

use core::sync::atomic::{AtomicU32, Ordering};

/// The source file every function is in, as the profile names it.
pub const SOURCE: &[u8] = b"fw/demo.tl";

/// Deepest call stack the machine runs (and the sampler copies).
pub const MAX_DEPTH: usize = 32;

/// One instruction.
#[derive(Clone, Copy)]
pub enum Op {
    Const(i32),
    Load(u8),
    Store(u8),
    Add,
    Sub,
    Lt,
    /// Jump to the index if the popped value is zero.
    Jz(u16),
    Jmp(u16),
    /// Call a function: its arguments are popped into its first locals.
    Call(u8),
    Ret,
    Pop,
}

/// A function: name, arity, code and the source line of each instruction.
pub struct Function {
    pub name: &'static [u8],
    pub arity: u8,
    pub code: &'static [Op],
    pub lines: &'static [u16],
}

pub const MAIN: u8 = 0;
pub const FIB: u8 = 1;
pub const SUM_TO: u8 = 2;

/// How many times `main` runs its loop.
pub const ROUNDS: i32 = 40;

use Op::*;

/// The program, as `fw/demo.tl` would read:
///
/// ```text
///  1 fn main():
///  2   r = 0
///  3   while r < ROUNDS:
///  4     fib(15)
///  5     sum_to(400)
///  6     r = r + 1
///  7   return 0
///
/// 10 fn fib(n):
/// 11   if n < 2: return n
/// 12   return fib(n - 1) + fib(n - 2)
///
/// 20 fn sum_to(n):
/// 21   s = 0; i = 0
/// 22   while i < n:
/// 23     s = s + i
/// 24     i = i + 1
/// 25   return s
/// ```
// One row per source line: rustfmt would put each instruction on its own.
#[rustfmt::skip]
pub static PROGRAM: [Function; 3] = [
    Function {
        name: b"main",
        arity: 0,
        code: &[
            Const(0), Store(0),                                     // 2
            Load(0), Const(ROUNDS), Lt, Jz(17),                     // 3
            Const(15), Call(FIB), Pop,                              // 4
            Const(400), Call(SUM_TO), Pop,                          // 5
            Load(0), Const(1), Add, Store(0), Jmp(2),               // 6
            Const(0), Ret,                                          // 7
        ],
        lines: &[2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 6, 7, 7],
    },
    Function {
        name: b"fib",
        arity: 1,
        code: &[
            Load(0), Const(2), Lt, Jz(6), Load(0), Ret,             // 11
            Load(0), Const(1), Sub, Call(FIB),                      // 12
            Load(0), Const(2), Sub, Call(FIB), Add, Ret,            // 12
        ],
        lines: &[11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12],
    },
    Function {
        name: b"sum_to",
        arity: 1,
        code: &[
            Const(0), Store(1), Const(0), Store(2),                 // 21
            Load(2), Load(0), Lt, Jz(17),                           // 22
            Load(1), Load(2), Add, Store(1),                        // 23
            Load(2), Const(1), Add, Store(2), Jmp(4),               // 24
            Load(1), Ret,                                           // 25
        ],
        lines: &[21, 21, 21, 21, 22, 22, 22, 22, 23, 23, 23, 23, 24, 24, 24, 24, 24, 25, 25],
    },
];

/// A published frame: function in the high half, line in the low half.
pub fn pack(function: u8, line: u16) -> u32 {
    (u32::from(function) << 16) | u32::from(line)
}

/// The function and line of a published frame.
pub fn unpack(frame: u32) -> (u8, u16) {
    ((frame >> 16) as u8, frame as u16)
}

/// The call stack as the sampler sees it, root first.
pub static FRAMES: [AtomicU32; MAX_DEPTH] = [const { AtomicU32::new(0) }; MAX_DEPTH];
pub static DEPTH: AtomicU32 = AtomicU32::new(0);

/// Why the machine stopped short.
#[derive(Clone, Copy, Debug, defmt::Format)]
pub enum Fault {
    StackOverflow,
    CallTooDeep,
    BadJump,
}

struct Frame {
    function: u8,
    pc: usize,
    locals: [i32; 4],
    base: usize,
}

/// The machine: runs `main` to its end, `step` by `step`.
pub struct Machine {
    frames: [Frame; MAX_DEPTH],
    depth: usize,
    stack: [i32; 64],
    sp: usize,
    pub result: Option<i32>,
    pub steps: u64,
}

impl Machine {
    pub const fn new() -> Self {
        const EMPTY: Frame = Frame { function: 0, pc: 0, locals: [0; 4], base: 0 };
        Machine { frames: [EMPTY; MAX_DEPTH], depth: 0, stack: [0; 64], sp: 0, result: None, steps: 0 }
    }

    /// Enters `main`.
    pub fn start(&mut self) {
        self.enter(MAIN, 0).ok();
    }

    fn publish(&self, at: usize) {
        let f = &self.frames[at];
        let line = PROGRAM[usize::from(f.function)].lines.get(f.pc).copied().unwrap_or(0);
        FRAMES[at].store(pack(f.function, line), Ordering::Relaxed);
    }

    fn enter(&mut self, function: u8, base: usize) -> Result<(), Fault> {
        if self.depth == MAX_DEPTH {
            return Err(Fault::CallTooDeep);
        }
        let arity = usize::from(PROGRAM[usize::from(function)].arity);
        let mut locals = [0; 4];
        locals[..arity].copy_from_slice(&self.stack[base..base + arity]);
        self.sp = base;
        self.frames[self.depth] = Frame { function, pc: 0, locals, base };
        self.publish(self.depth);
        self.depth += 1;
        DEPTH.store(self.depth as u32, Ordering::Release);
        Ok(())
    }

    fn push(&mut self, v: i32) -> Result<(), Fault> {
        *self.stack.get_mut(self.sp).ok_or(Fault::StackOverflow)? = v;
        self.sp += 1;
        Ok(())
    }

    fn pop(&mut self) -> i32 {
        self.sp = self.sp.saturating_sub(1);
        self.stack[self.sp]
    }

    /// Runs one instruction; false once `main` has returned.
    pub fn step(&mut self) -> Result<bool, Fault> {
        if self.depth == 0 {
            return Ok(false);
        }
        self.steps += 1;
        let top = self.depth - 1;
        let function = &PROGRAM[usize::from(self.frames[top].function)];
        let pc = self.frames[top].pc;
        let op = *function.code.get(pc).ok_or(Fault::BadJump)?;
        let mut next = pc + 1;
        match op {
            Const(v) => self.push(v)?,
            Load(i) => self.push(self.frames[top].locals[usize::from(i)])?,
            Store(i) => self.frames[top].locals[usize::from(i)] = self.pop(),
            Add | Sub | Lt => {
                let (b, a) = (self.pop(), self.pop());
                let v = match op {
                    Add => a.wrapping_add(b),
                    Sub => a.wrapping_sub(b),
                    _ => i32::from(a < b),
                };
                self.push(v)?;
            }
            Jz(to) => {
                if self.pop() == 0 {
                    next = usize::from(to);
                }
            }
            Jmp(to) => next = usize::from(to),
            Pop => {
                self.pop();
            }
            Call(f) => {
                self.frames[top].pc = next;
                let arity = usize::from(PROGRAM[usize::from(f)].arity);
                let base = self.sp.checked_sub(arity).ok_or(Fault::StackOverflow)?;
                return self.enter(f, base).map(|()| true);
            }
            Ret => {
                let v = self.pop();
                let base = self.frames[top].base;
                self.depth = top;
                DEPTH.store(top as u32, Ordering::Release);
                if top == 0 {
                    self.result = Some(v);
                    return Ok(false);
                }
                self.sp = base;
                self.push(v)?;
                return Ok(true);
            }
        }
        let moved = PROGRAM[usize::from(self.frames[top].function)].lines.get(next) != function.lines.get(pc);
        self.frames[top].pc = next;
        if moved {
            self.publish(top);
        }
        Ok(true)
    }
}
