//! Metric expressions: the formulas of Arm's telemetry specifications (`STALL_BACKEND /
//! CPU_CYCLES * 100`), Linux perf's metric syntax (`a if #slots - 5 else b`, `min(a, b)`) and
//! C-style conditionals (`c ? a : b`).
//!
//! Grammar (lowest precedence first):
//! ```text
//! expr    := or ( "if" or "else" expr )?  |  or ( "?" expr ":" expr )?
//! or      := and ( ("or" | "||") and )*
//! and     := cmp ( ("and" | "&&") cmp )*
//! cmp     := add ( ("<" | "<=" | ">" | ">=" | "==" | "!=") add )?
//! add     := mul ( ("+" | "-") mul )*
//! mul     := unary ( ("*" | "/") unary )*
//! unary   := ("-" | "!" | "not") unary | primary
//! primary := NUMBER | "#" NAME | NAME "(" expr ("," expr)* ")" | NAME | "(" expr ")"
//! ```
//! Names are event names (case-insensitive, stored upper-case) except the named constants
//! `SLOTS` / `#slots` (the core's dispatch width in slots per cycle).
//!
//! Evaluation never turns an undefined value into a number: `0/0`, `x/0`, a missing event
//! or a missing constant make the whole result [`Unavailable`]. Conditionals evaluate only the
//! branch they take, so an unavailable value in the other branch does not matter.

use crate::error::ExprError;
use std::collections::BTreeSet;
use std::fmt;

/// A named constant a formula may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Constant {
    /// Slots per cycle: `caps/slots` of the PMU (PMMIR_EL1.SLOTS), else the catalog's width.
    Slots,
}

impl Constant {
    pub fn name(self) -> &'static str {
        match self {
            Constant::Slots => "SLOTS",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
    fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div => 5,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Min,
    Max,
    Abs,
}

/// A parsed formula.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Num(f64),
    Event(String),
    Const(Constant),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `then if cond else otherwise`
    Cond {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    Call(Func, Vec<Expr>),
}

/// Why a metric has no value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Unavailable {
    /// `0 / 0`: nothing happened that the ratio is about (e.g. no branches at all).
    ZeroOverZero,
    /// `x / 0` with `x != 0`: the counts contradict each other.
    DivisionByZero,
    /// An event the formula needs was not counted (missing, `<not counted>`, `<not supported>`).
    MissingEvent { event: String },
    /// A named constant (slots) is not known for this CPU.
    MissingConstant { constant: String },
    /// The result is not a finite number.
    NotFinite,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::ZeroOverZero => f.write_str("0/0"),
            Unavailable::DivisionByZero => f.write_str("division by zero"),
            Unavailable::MissingEvent { event } => write!(f, "{event} not counted"),
            Unavailable::MissingConstant { constant } => write!(f, "{constant} unknown"),
            Unavailable::NotFinite => f.write_str("not finite"),
        }
    }
}

/// Values of events and constants for one evaluation.
pub trait Env {
    fn event(&self, name: &str) -> Option<f64>;
    fn constant(&self, c: Constant) -> Option<f64>;
}

impl Expr {
    pub fn parse(src: &str) -> Result<Expr, ExprError> {
        let tokens = lex(src)?;
        let mut p = Parser {
            src,
            tokens,
            pos: 0,
        };
        let e = p.expr()?;
        if p.pos < p.tokens.len() {
            return Err(p.error("unexpected trailing input"));
        }
        Ok(e)
    }

    /// The events the formula reads (upper-case names).
    pub fn events(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.visit(&mut |e| {
            if let Expr::Event(n) = e {
                out.insert(n.clone());
            }
        });
        out
    }

    /// The named constants the formula reads.
    pub fn constants(&self) -> BTreeSet<Constant> {
        let mut out = BTreeSet::new();
        self.visit(&mut |e| {
            if let Expr::Const(c) = e {
                out.insert(*c);
            }
        });
        out
    }

    fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Num(_) | Expr::Event(_) | Expr::Const(_) => {}
            Expr::Neg(a) | Expr::Not(a) => a.visit(f),
            Expr::Bin(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Cond {
                cond,
                then,
                otherwise,
            } => {
                cond.visit(f);
                then.visit(f);
                otherwise.visit(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.visit(f)),
        }
    }

    /// Replaces a literal slot width next to `CPU_CYCLES` (`5 * CPU_CYCLES`, `CPU_CYCLES * 5`)
    /// by the named constant `SLOTS`, so the width comes from the PMU (`caps/slots`) instead of
    /// being hard-coded in the formula. Returns how many literals were replaced.
    pub fn name_slot_literals(&mut self, width: u32) -> usize {
        let w = f64::from(width);
        let is_cycles = |e: &Expr| matches!(e, Expr::Event(n) if n == "CPU_CYCLES");
        match self {
            Expr::Bin(BinOp::Mul, a, b) => {
                if matches!(**a, Expr::Num(n) if n == w) && is_cycles(b) {
                    **a = Expr::Const(Constant::Slots);
                    return 1;
                }
                if matches!(**b, Expr::Num(n) if n == w) && is_cycles(a) {
                    **b = Expr::Const(Constant::Slots);
                    return 1;
                }
                a.name_slot_literals(width) + b.name_slot_literals(width)
            }
            Expr::Bin(_, a, b) => a.name_slot_literals(width) + b.name_slot_literals(width),
            Expr::Neg(a) | Expr::Not(a) => a.name_slot_literals(width),
            Expr::Cond {
                cond,
                then,
                otherwise,
            } => {
                cond.name_slot_literals(width)
                    + then.name_slot_literals(width)
                    + otherwise.name_slot_literals(width)
            }
            Expr::Call(_, args) => args.iter_mut().map(|a| a.name_slot_literals(width)).sum(),
            Expr::Num(_) | Expr::Event(_) | Expr::Const(_) => 0,
        }
    }

    pub fn eval(&self, env: &dyn Env) -> Result<f64, Unavailable> {
        let v = self.eval_inner(env)?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(Unavailable::NotFinite)
        }
    }

    fn eval_inner(&self, env: &dyn Env) -> Result<f64, Unavailable> {
        let truth = |b: bool| if b { 1.0 } else { 0.0 };
        Ok(match self {
            Expr::Num(n) => *n,
            Expr::Event(name) => env.event(name).ok_or_else(|| Unavailable::MissingEvent {
                event: name.clone(),
            })?,
            Expr::Const(c) => env
                .constant(*c)
                .ok_or_else(|| Unavailable::MissingConstant {
                    constant: c.name().to_string(),
                })?,
            Expr::Neg(a) => -a.eval_inner(env)?,
            Expr::Not(a) => truth(a.eval_inner(env)? == 0.0),
            Expr::Bin(BinOp::And, a, b) => {
                truth(a.eval_inner(env)? != 0.0 && b.eval_inner(env)? != 0.0)
            }
            Expr::Bin(BinOp::Or, a, b) => {
                truth(a.eval_inner(env)? != 0.0 || b.eval_inner(env)? != 0.0)
            }
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval_inner(env)?, b.eval_inner(env)?);
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => {
                        if y == 0.0 {
                            return Err(if x == 0.0 {
                                Unavailable::ZeroOverZero
                            } else {
                                Unavailable::DivisionByZero
                            });
                        }
                        x / y
                    }
                    BinOp::Lt => truth(x < y),
                    BinOp::Le => truth(x <= y),
                    BinOp::Gt => truth(x > y),
                    BinOp::Ge => truth(x >= y),
                    BinOp::Eq => truth(x == y),
                    BinOp::Ne => truth(x != y),
                    BinOp::And | BinOp::Or => unreachable!("handled above"),
                }
            }
            Expr::Cond {
                cond,
                then,
                otherwise,
            } => {
                if cond.eval_inner(env)? != 0.0 {
                    then.eval_inner(env)?
                } else {
                    otherwise.eval_inner(env)?
                }
            }
            Expr::Call(func, args) => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(a.eval_inner(env)?);
                }
                match func {
                    Func::Min => vals.iter().copied().fold(f64::INFINITY, f64::min),
                    Func::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Func::Abs => vals.first().copied().unwrap_or(f64::NAN).abs(),
                }
            }
        })
    }

    fn fmt_prec(&self, f: &mut fmt::Formatter<'_>, parent: u8) -> fmt::Result {
        match self {
            Expr::Num(n) => write!(f, "{n}"),
            Expr::Event(n) => f.write_str(n),
            Expr::Const(c) => f.write_str(c.name()),
            Expr::Neg(a) => {
                f.write_str("-")?;
                a.fmt_prec(f, 6)
            }
            Expr::Not(a) => {
                f.write_str("!")?;
                a.fmt_prec(f, 6)
            }
            Expr::Bin(op, a, b) => {
                let p = op.precedence();
                if p < parent {
                    f.write_str("(")?;
                }
                a.fmt_prec(f, p)?;
                write!(f, " {} ", op.symbol())?;
                // Left-associative: a right operand of equal precedence needs parentheses.
                b.fmt_prec(f, p + 1)?;
                if p < parent {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Expr::Cond {
                cond,
                then,
                otherwise,
            } => {
                if parent > 0 {
                    f.write_str("(")?;
                }
                then.fmt_prec(f, 1)?;
                f.write_str(" if ")?;
                cond.fmt_prec(f, 1)?;
                f.write_str(" else ")?;
                otherwise.fmt_prec(f, 0)?;
                if parent > 0 {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Expr::Call(func, args) => {
                let name = match func {
                    Func::Min => "min",
                    Func::Max => "max",
                    Func::Abs => "abs",
                };
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    a.fmt_prec(f, 0)?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for Expr {
    /// Canonical text with only the parentheses precedence needs; parses back to the same tree.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_prec(f, 0)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Hash(String),
    Op(&'static str),
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |offset: usize, message: &str| ExprError {
        expr: src.to_string(),
        offset,
        message: message.to_string(),
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            if c == b'0' && matches!(b.get(i + 1), Some(b'x') | Some(b'X')) {
                i += 2;
                while i < b.len() && b[i].is_ascii_hexdigit() {
                    i += 1;
                }
                let v = u64::from_str_radix(&src[start + 2..i], 16)
                    .map_err(|_| err(start, "bad hexadecimal number"))?;
                out.push((Tok::Num(v as f64), start));
                continue;
            }
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let v: f64 = src[start..i]
                .parse()
                .map_err(|_| err(start, "bad number"))?;
            out.push((Tok::Num(v), start));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'#' {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            let word = &src[start..i];
            if let Some(rest) = word.strip_prefix('#') {
                if rest.is_empty() {
                    return Err(err(start, "'#' must be followed by a constant name"));
                }
                out.push((Tok::Hash(rest.to_string()), start));
            } else {
                out.push((Tok::Name(word.to_string()), start));
            }
            continue;
        }
        let two = if i + 1 < b.len() { &src[i..i + 2] } else { "" };
        let op2 = ["<=", ">=", "==", "!=", "&&", "||"]
            .into_iter()
            .find(|o| *o == two);
        if let Some(o) = op2 {
            out.push((Tok::Op(o), start));
            i += 2;
            continue;
        }
        let op1 = ["+", "-", "*", "/", "(", ")", ",", "<", ">", "!", "?", ":"]
            .into_iter()
            .find(|o| o.as_bytes()[0] == c);
        match op1 {
            Some(o) => {
                out.push((Tok::Op(o), start));
                i += 1;
            }
            None => return Err(err(start, "unexpected character")),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> ExprError {
        ExprError {
            expr: self.src.to_string(),
            offset: self
                .tokens
                .get(self.pos)
                .map(|t| t.1)
                .unwrap_or(self.src.len()),
            message: message.to_string(),
        }
    }
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.0)
    }
    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Name(n)) if n.eq_ignore_ascii_case(w)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expr(&mut self) -> Result<Expr, ExprError> {
        let first = self.or()?;
        if self.eat_word("if") {
            let cond = self.or()?;
            if !self.eat_word("else") {
                return Err(self.error("expected 'else'"));
            }
            let otherwise = self.expr()?;
            return Ok(Expr::Cond {
                cond: Box::new(cond),
                then: Box::new(first),
                otherwise: Box::new(otherwise),
            });
        }
        if self.eat_op("?") {
            let then = self.expr()?;
            if !self.eat_op(":") {
                return Err(self.error("expected ':'"));
            }
            let otherwise = self.expr()?;
            return Ok(Expr::Cond {
                cond: Box::new(first),
                then: Box::new(then),
                otherwise: Box::new(otherwise),
            });
        }
        Ok(first)
    }
    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut a = self.and()?;
        while self.eat_op("||") || self.eat_word("or") {
            let b = self.and()?;
            a = Expr::Bin(BinOp::Or, Box::new(a), Box::new(b));
        }
        Ok(a)
    }
    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut a = self.cmp()?;
        while self.eat_op("&&") || self.eat_word("and") {
            let b = self.cmp()?;
            a = Expr::Bin(BinOp::And, Box::new(a), Box::new(b));
        }
        Ok(a)
    }
    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let a = self.add()?;
        let ops = [
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ];
        for (s, op) in ops {
            if self.eat_op(s) {
                let b = self.add()?;
                return Ok(Expr::Bin(op, Box::new(a), Box::new(b)));
            }
        }
        Ok(a)
    }
    fn add(&mut self) -> Result<Expr, ExprError> {
        let mut a = self.mul()?;
        loop {
            let op = if self.eat_op("+") {
                BinOp::Add
            } else if self.eat_op("-") {
                BinOp::Sub
            } else {
                return Ok(a);
            };
            let b = self.mul()?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    fn mul(&mut self) -> Result<Expr, ExprError> {
        let mut a = self.unary()?;
        loop {
            let op = if self.eat_op("*") {
                BinOp::Mul
            } else if self.eat_op("/") {
                BinOp::Div
            } else {
                return Ok(a);
            };
            let b = self.unary()?;
            a = Expr::Bin(op, Box::new(a), Box::new(b));
        }
    }
    fn unary(&mut self) -> Result<Expr, ExprError> {
        if self.eat_op("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_op("!") || self.eat_word("not") {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }
    fn primary(&mut self) -> Result<Expr, ExprError> {
        let Some((tok, _)) = self.tokens.get(self.pos).cloned() else {
            return Err(self.error("unexpected end of expression"));
        };
        match tok {
            Tok::Num(n) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Tok::Hash(name) => {
                self.pos += 1;
                constant(&name).map(Expr::Const).ok_or_else(|| {
                    self.pos -= 1;
                    self.error("unknown constant (known: #slots)")
                })
            }
            Tok::Name(name) => {
                self.pos += 1;
                if self.eat_op("(") {
                    let func = match name.to_ascii_lowercase().as_str() {
                        "min" => Func::Min,
                        "max" => Func::Max,
                        "abs" => Func::Abs,
                        _ => return Err(self.error("unknown function (known: min, max, abs)")),
                    };
                    let mut args = vec![self.expr()?];
                    while self.eat_op(",") {
                        args.push(self.expr()?);
                    }
                    if !self.eat_op(")") {
                        return Err(self.error("expected ')'"));
                    }
                    if func == Func::Abs && args.len() != 1 {
                        return Err(self.error("abs takes one argument"));
                    }
                    return Ok(Expr::Call(func, args));
                }
                if let Some(c) = constant(&name) {
                    return Ok(Expr::Const(c));
                }
                if ["if", "else", "and", "or", "not"]
                    .iter()
                    .any(|k| name.eq_ignore_ascii_case(k))
                {
                    self.pos -= 1;
                    return Err(self.error("keyword where a value was expected"));
                }
                Ok(Expr::Event(name.to_ascii_uppercase()))
            }
            Tok::Op("(") => {
                self.pos += 1;
                let e = self.expr()?;
                if !self.eat_op(")") {
                    return Err(self.error("expected ')'"));
                }
                Ok(e)
            }
            Tok::Op(_) => Err(self.error("operator where a value was expected")),
        }
    }
}

fn constant(name: &str) -> Option<Constant> {
    match name.to_ascii_lowercase().as_str() {
        "slots" => Some(Constant::Slots),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Map(BTreeMap<&'static str, f64>, Option<f64>);
    impl Env for Map {
        fn event(&self, name: &str) -> Option<f64> {
            self.0.get(name).copied()
        }
        fn constant(&self, _: Constant) -> Option<f64> {
            self.1
        }
    }
    fn env(pairs: &[(&'static str, f64)], slots: Option<f64>) -> Map {
        Map(pairs.iter().copied().collect(), slots)
    }
    fn ev(src: &str, e: &Map) -> Result<f64, Unavailable> {
        Expr::parse(src).unwrap().eval(e)
    }

    #[test]
    fn arithmetic_precedence_and_associativity() {
        let e = env(&[], None);
        assert_eq!(ev("1 + 2 * 3", &e), Ok(7.0));
        assert_eq!(ev("(1 + 2) * 3", &e), Ok(9.0));
        assert_eq!(ev("8 / 4 / 2", &e), Ok(1.0));
        assert_eq!(ev("10 - 4 - 3", &e), Ok(3.0));
        assert_eq!(ev("-2 * -3", &e), Ok(6.0));
        assert_eq!(ev("1.5e3 + 0x10", &e), Ok(1516.0));
    }

    #[test]
    fn zero_over_zero_is_unavailable_never_zero() {
        let e = env(&[("BR_RETIRED", 0.0), ("BR_MIS_PRED_RETIRED", 0.0)], None);
        assert_eq!(
            ev("BR_MIS_PRED_RETIRED / BR_RETIRED", &e),
            Err(Unavailable::ZeroOverZero)
        );
        assert_eq!(
            ev("BR_MIS_PRED_RETIRED / BR_RETIRED * 100", &e),
            Err(Unavailable::ZeroOverZero)
        );
        assert_eq!(ev("1 / BR_RETIRED", &e), Err(Unavailable::DivisionByZero));
        assert_eq!(
            ev("X / 2", &e),
            Err(Unavailable::MissingEvent { event: "X".into() })
        );
    }

    #[test]
    fn comparisons_conditionals_min_max() {
        let e = env(&[("A", 3.0), ("B", 5.0)], Some(5.0));
        assert_eq!(ev("A < B", &e), Ok(1.0));
        assert_eq!(ev("A >= B", &e), Ok(0.0));
        assert_eq!(ev("A == 3 && B != 3", &e), Ok(1.0));
        assert_eq!(ev("A > 4 or B > 4", &e), Ok(1.0));
        assert_eq!(ev("min(A, B, 4)", &e), Ok(3.0));
        assert_eq!(ev("max(A, B) * 2", &e), Ok(10.0));
        assert_eq!(ev("abs(A - B)", &e), Ok(2.0));
        // perf syntax: `x if c else y`; #slots - 5 is false for a 5-wide core.
        assert_eq!(ev("A if #slots - 5 else A - 1", &e), Ok(2.0));
        assert_eq!(ev("A > B ? 1 : 2", &e), Ok(2.0));
        // The branch not taken may be unavailable.
        assert_eq!(ev("A if 1 else MISSING", &e), Ok(3.0));
        assert_eq!(ev("not A", &e), Ok(0.0));
    }

    #[test]
    fn slots_constant_and_literal_naming() {
        let e = env(
            &[("STALL_SLOT_BACKEND", 50.0), ("CPU_CYCLES", 10.0)],
            Some(5.0),
        );
        let mut x = Expr::parse("STALL_SLOT_BACKEND / (CPU_CYCLES * 5) - BR * 5").unwrap();
        assert_eq!(x.name_slot_literals(5), 1);
        assert_eq!(
            x.to_string(),
            "STALL_SLOT_BACKEND / (CPU_CYCLES * SLOTS) - BR * 5"
        );
        assert_eq!(
            ev("STALL_SLOT_BACKEND / (#slots * CPU_CYCLES)", &e),
            Ok(1.0)
        );
        let none = env(&[("CPU_CYCLES", 1.0)], None);
        assert_eq!(
            ev("SLOTS * CPU_CYCLES", &none),
            Err(Unavailable::MissingConstant {
                constant: "SLOTS".into()
            })
        );
    }

    #[test]
    fn display_round_trips() {
        for src in [
            "STALL_BACKEND / CPU_CYCLES * 100",
            "100 * (STALL_SLOT_FRONTEND / (CPU_CYCLES * 5) - BR_MIS_PRED / CPU_CYCLES)",
            "(1 - STALL_SLOT / (CPU_CYCLES * 5)) * (OP_RETIRED / OP_SPEC) * 100",
            "A - (B - C)",
            "A / (B / C)",
            "A if B < C else D",
            "min(A, B + 1)",
        ] {
            let e = Expr::parse(src).unwrap();
            assert_eq!(Expr::parse(&e.to_string()).unwrap(), e, "{src}");
        }
    }

    #[test]
    fn errors_have_offsets() {
        let err = Expr::parse("A + * B").unwrap_err();
        assert_eq!(err.offset, 4);
        assert!(Expr::parse("(A").is_err());
        assert!(Expr::parse("A B").is_err());
        assert!(Expr::parse("foo(A)").is_err());
        assert!(Expr::parse("#nope").is_err());
        assert!(Expr::parse("A if B").is_err());
        assert!(Expr::parse("A $ B").is_err());
    }

    #[test]
    fn events_are_collected_upper_case() {
        let e = Expr::parse("stall_slot / (#slots * cpu_cycles)").unwrap();
        assert_eq!(
            e.events().into_iter().collect::<Vec<_>>(),
            vec!["CPU_CYCLES".to_string(), "STALL_SLOT".to_string()]
        );
        assert_eq!(e.constants().len(), 1);
    }
}
