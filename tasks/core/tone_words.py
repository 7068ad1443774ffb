"""The words a drafted paragraph may use (core.tone), per locale, and the words it may not.

The allow-list (`VOCABULARY`) is what decides: a word that is not in it is refused,
whatever it means. It holds courtesy, the relationship, the reminder itself and the
grammar that joins them, and nothing a reader could act on or rely on: no number, time,
money, payment state, correction, destination or contact, threat, promise, third party
or negation. A word left out costs a false refusal (the template paragraph is sent); a
word let in can cost a client's money, so when in doubt a word stays out.

`PHRASES` are the few fixed turns of courtesy that need a word the list leaves out
("do not hesitate", "on time", "sin más demora"): the phrase passes whole, its words
do not pass alone.

`CATEGORIES` are not the rule: they name why a refused word is refused in the ledger
note, and a unit test proves that none of them overlaps the allow-list.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_EN = _words("""
a able aboard about above across again all along also although always am among amongst an and any
anything apologies apologise apologize appreciate appreciated appreciates appreciating appreciation
appreciative are arrange arranged arranging as ask asked asking asks assist assistance assisting
assure assured at attend attending attention attentive await awaiting aware awareness be because
been begin beginning begun being believe believed believing below besides best between both bring
bringing build building built busier business businesses busy but by came can careful carefully case
cases certain certainly choosing chosen circumstance circumstances clarification clarify clarifying
clearly client clients collaborating collaboration come comes coming commitment commitments
committed common company concern concerned concerning concerns confidence confident consider
considerate consideration considered considering consistent consistently continue continued
continuing convenience convenient cooperate cooperating cooperation cooperative cordial cordially
could count counted counting courteous courtesy cracks custom customer customer's customers dear
deeply delay delays delighted demanding demands dependable despite did difficult difficulties
difficulty diligent disappointed discuss discussing do does doing due each eager earliest easier
easily easy efficient effort efforts either email emails encourage encouraged enjoy enjoyed enjoying
enough ensure ensuring especially essential even ever every everything excellent expect expected
expecting experience experiences explain explaining explanation explanations face faced facing fair
fairly fantastic far feel feeling feels felt find finding finds firm firmer firmly follow followed
following follows for fortunately forward found friendly from further furthermore gave generally
gentle gently genuine genuinely get getting give given giving glad gladly go goes going gone good
goodwill got grateful gratefully gratitude great greatly had happen happened happening happens
happily happy hard has have having hear heard hearing heartfelt hectic help helped helpful
helpfulness helping helps hence here here's highly history holding honest honestly honored honour
honoured hope hoped hopeful hopefully hopes hoping how however i i'd i'll i'm i've if immediate
importance important importantly in inbox inconvenience indeed instance into invoice invoices is
issue issues it it's its itself just keen keep keeping keeps kept kind kindest kindly kindness knew
know knowing known knows lasting lately let let's lets like liked likely long-standing long-term
longstanding look looked looking looks losing lost lot lots love loved loyal loyalty made make makes
making manage managing many matter mattered matters may maybe me mean means meant meanwhile mention
mentioned mentioning message messages might mind minding miss missed moment more moreover most much
must mutual my myself natural naturally necessary need needed needing needs nice nicely normally
note noted notes notice noticed noting now occasionally occur occurred occurs of often on ongoing
open openly or organise organised organize organized our ours ourselves out outstanding overdue
overlook overlooked overlooking oversight paperwork particularly partnership partnerships past
patience patient pay paying payment payments perhaps pile plate pleasant please pleased pleasure
plenty polite politely possible possibly prevent preventing previous previously pride priority
privilege problem problems prompt prompting promptly proud punctual punctuality queries query
question questions quick quickly quite rarely rather reach reached reaching realise realised
realising realize realized realizing really reason reasons reassure reassured recent recently
recognise recognised recognize recognized record regard regarding regards regret regrettably
relation relations relationship relationships reliability reliable reliably relied rely relying
remain remains remember remembering remind reminded reminder reminders reminding replied replies
reply replying request requested requesting requests resolve resolving respect respectful
respectfully respond responded responding response review reviewed reviewing run running schedule
see seeing seen serious seriously settle settling shall should show showing shown shows simple
simplest simply sincere sincerely sincerity situation slip slipped slips smooth smoothly so some
something sometimes soon sorry standing start started starting stay staying still straightforward
such sure surely take than thank thanked thankful thankfully thanking thanks thankyou that that's
the there there's therefore these thing things think thinking this those though thought thoughtful
thoughts through throughout thus to together too toward towards track treat treated treating trouble
truly trust trusted trusting trusts trustworthy unclear understand understanding understands
understood unfortunate unfortunately unless unpaid up urge urged urgency urgent urgently urging us
usual usually valuable value valued values very want wanted wanting wants warm warmest warmly was we
we'd we'll we're we've welcome well went were when whether which while whilst why will willing wish
wished wishes with wonder wonderful wondering work worked working workload works worried worry would
write writing years you you'd you'll you're you've your yours yourself yourselves
""")

_ES = _words("""
a abajo abonar abonarla abone abonen aclaración aclarar aclararlo acumula acumulan acumularse además
afectuosamente agradable agradecemos agradecen agradecer agradeceremos agradecerle agradecerles
agradecería agradeceríamos agradecida agradecidas agradecido agradecidos agradeciendo agradecimiento
ahora al alegra alegramos alegrará alegría algo alguna algunas alguno algunos algún allí alto
amabilidad amable amablemente amables ambas ambos animamos antemano anterior anteriores antes apoyar
apoyo apreciamos apreciar aprecio aquí arriba asimismo asunto asuntos así atención atendemos atender
atenderemos atenderle atenta atentamente atentas atento atentos atiende aunque ayuda ayudamos ayudar
ayudaremos ayudarle ayudarles ayudará años aún basta bastante bien bienestar bienvenida breve
brevemente buen buena buenas bueno buenos cada caso circunstancias claro cliente clientes
colaboración colaboramos colaborando colaborar comentar comentarlo comenzar comienzo como
complicarse comprendemos comprender comprensión con confiado confiamos confiando confianza confiar
confiaremos confía conocemos conocer constante construido construir consulta consultas contamos
contar contarle contarles contenta contento contentos contestar conteste continua continuada
conveniencia convierta convirtiera cordial cordiales cordialidad cordialmente correo correos
cortesía cortés cortésmente cosas cualquier cuando cuanto cumplida cumplidor cumplidores cuál cómo
dado damos dar de deba debamos debemos del demostrado demuestra desafortunadamente desapercibida
descuido deseamos desear despiste dificultad dificultades disculpamos disculpas disculpe disposición
dispuestos duda dudas duradera duradero díganos díganoslo e efectuar efectúe efectúen el empezamos
empezar empresa en encantada encantadas encantado encantados encantará encantaría encontrar
encuentra encuentre encuentro entendemos entender entienda entiende entiendo entre es esa esas
escribimos escribir escríbanos ese eso esos especialmente esperamos esperanza espero esta estamos
estar estaremos estará estaría estas este estimada estimado esto estos estupenda estupendo está
están esté estén excelente experiencia explicación facilitar factura facturas favor fiable fidelidad
fiel fieles figura frecuentemente fácil fácilmente generalmente gestionar gestionarlo gestione
gracias gran gusta gustado gustará gustaría gusto ha habitualmente hace hacer haciéndolo haga han
hay haya hemos historial ido igualmente impagada impida impide importancia importante incidencia
incidencias inconveniente inconvenientes inmediata ir juntas juntos la lamentablemente lamentamos
larga largo las le lealtad les lo los magnífico mantenemos mantener me mejor mejores mensaje mi
mientras mis momento momentos mostrado motivo motivos mucha muchas mucho muchos muy más necesario
necesita necesitado necesitamos necesitan negocio normalmente nos nosotros nuestra nuestras nuestro
nuestros o ocasionalmente ocasión ocuparse ocupe ocupen ocurre ocurrido ocurrir olvido orgullosas
orgulloso orgullosos paga pagar pagarla pagarlo pagarse pago pagos pague paguen papeleo para pasa
pasado pasar pedimos pedir pedirle pendiente pendientes pequeño perder perdido pero pesar pierda
placer podamos podemos poder ponérselo por porque posible posibles pregunta preguntas preocupa
preocupación preocupados preocuparse preocupe prestar prestara preste prioridad problema problemas
producen pronta pronto pueda puede pueden puntual puntuales puntualidad puntualmente que quedamos
quedo queremos quiere quisiéramos qué rapidez realice realicen realizar realizara realmente reciente
recientemente recientes recordamos recordar recordarle recordarles recordaríamos recordatorio
recordatorios recuerde regularice regularizar regularizara regularizarla regularizarlo relaciones
relación resolver resolverla resolverlo respeto respetuosamente responda respondan responde
responder respondiendo responsable respuesta retraso retrasos revisar revisara revisarla revisarlo
revise revisen revisión rogamos rogarle rogaríamos ruego rápida rápidamente rápido sabe sabemos
saber saludo saludos satisfecha satisfecho satisfechos se sea sean seguimos seguir seguiremos
seguirá segura seguramente seguro seguros sencilla sencillez sencillo sentimos ser seria seriedad
serio si sido siempre siendo siga significa significado sigue simple simplemente sincera
sinceramente sincero situación sobre solicitamos solucionar solucionarlo son su sucede suceder sus
suya suyo también tan tanto tantos tenemos tener tenerle tenerles tenga tiene toda todas todavía
todo todos tomar trabajado trabajamos trabajando trabajar trabajo trata trate u un una unas unos
urgencia urgente usted ustedes va valiosa valioso valora valoración valorada valorado valoramos
valorar valoraremos vamos van vaya veces vemos vencida ver verdad verdaderamente vez visto y yo
""")

PHRASES: dict[str, tuple[tuple[str, ...], ...]] = {
    "en": (
        ("do", "not", "hesitate"), ("don't", "hesitate"), ("please", "don't", "hesitate"),
        ("on", "time"), ("in", "time"), ("feel", "free"),
        ("without", "further", "delay"), ("without", "delay"), ("any", "delay"),
        ("if", "not"), ("you", "in", "advance"), ("after", "many", "years"),
        ("after", "all", "these", "years"),
        ("over", "the", "years"), ("rest", "assured"), ("for", "a", "long", "time"),
        ("as", "soon", "as", "possible"), ("as", "soon", "as", "you", "can"),
        ("thank", "you", "very", "much"), ("thank", "you", "so", "much"),
        ("at", "your", "earliest", "convenience"), ("much", "appreciated"),
        ("thank", "you", "for", "taking", "care", "of", "this"), ("a", "great", "deal"),
        ("thank", "you", "for", "your", "support"), ("full", "cooperation"), ("full", "attention"),
        # Whole courtesy sentences a model writes often: fixed text, so they say nothing new.
        ("if", "you", "have", "already", "paid", "please", "disregard", "this", "message"),
        ("if", "you", "have", "already", "paid", "please", "ignore", "this", "message"),
        ("if", "you", "have", "already", "made", "the", "payment", "please", "disregard", "this", "message"),
        ("if", "payment", "has", "already", "been", "made", "please", "disregard", "this", "message"),
        ("we", "have", "not", "yet", "received", "payment"),
        ("we", "have", "not", "received", "payment"),
    ),
    "es": (
        ("no", "dude", "en"), ("no", "duden", "en"), ("no", "dude"),
        ("sin", "más", "demora"), ("sin", "demora"), ("a", "tiempo"),
        ("por", "nuestra", "parte"), ("de", "nuevo"), ("sin", "pagarse"), ("sin", "pagar"),
        ("no", "está", "claro"),
        ("el", "día", "a", "día"), ("después", "de", "tantos", "años"), ("hasta", "ahora"),
        ("escribimos", "solo", "para"), ("cuanto", "antes"), ("lo", "antes", "posible"),
        ("en", "cuanto", "pueda"), ("muchas", "gracias"), ("agradeceríamos", "mucho"),
        ("algo", "le", "impide"), ("alguna", "duda"), ("alguna", "pregunta"), ("algún", "problema"),
        ("con", "mucho", "gusto"), ("entre", "manos"), ("a", "la", "espera", "de"), ("ambas", "partes"),
        ("toda", "su", "colaboración"),
        ("si", "ya", "ha", "realizado", "el", "pago", "ignore", "este", "mensaje"),
        ("si", "ya", "ha", "realizado", "el", "pago", "le", "rogamos", "que", "ignore", "este", "mensaje"),
        ("si", "ya", "ha", "efectuado", "el", "pago", "ignore", "este", "mensaje"),
        ("si", "ya", "ha", "pagado", "ignore", "este", "mensaje"),
        ("todavía", "no", "hemos", "recibido", "el", "pago"),
        ("aún", "no", "hemos", "recibido", "el", "pago"),
    ),
}

# A sentence about paying may not say how much, or when at the latest: "pay what you can",
# "as much as you can", "some of it", "when you can", "pague lo que pueda" are made of
# allowed words. In a sentence holding a PAYING word, a QUANTITY word (outside a fixed
# phrase) refuses it.
PAYING: dict[str, frozenset[str]] = {
    "en": _words("pay paying payment payments settle settling arrange arranging arranged"),
    "es": _words("""pago pagos pagar pague paguen pagarla pagarlo paga pagarse abonar abone abonen abonarla
        efectuar efectúe efectúen regularizar regularice regularizarla regularizarlo regularizara"""),
}
QUANTITY: dict[str, frozenset[str]] = {
    "en": _words("some much many more most lot lots plenty enough rather than as when while little bit"),
    "es": _words("""algo alguna algún alguno algunos algunas mucho mucha muchos muchas más bastante tanto
        tantos cuanto cuando mientras lo"""),
}
# Thanks in a sentence about paying reads as a receipt ("thank you for your payment",
# "gracias por su pago"): a THANKS word there refuses it too.
THANKS: dict[str, frozenset[str]] = {
    "en": _words("thank thanks thanked thanking thankful thankyou gratitude"),
    "es": _words("gracias agradecemos agradecido agradecidos agradecida agradecidas agradecimiento"),
}

# Phrases true by the step itself: the second reminder may say that it is the second.
STEP_PHRASES: dict[str, dict[str, tuple[tuple[str, ...], ...]]] = {
    "REMINDED_2": {"en": (("our", "second", "reminder"), ("a", "second", "reminder")),
                   "es": (("nuestro", "segundo", "recordatorio"), ("un", "segundo", "recordatorio"))},
}

VOCABULARY: dict[str, frozenset[str]] = {"en": _EN, "es": _ES}

# Why a word outside the list is refused, for the ledger note. Not the rule: a word in no
# category is refused all the same (Rule.WORD).
CATEGORIES: dict[str, dict[str, frozenset[str]]] = {
    "en": {
        "number": _words("""zero nil one two three four five six seven eight nine ten eleven twelve
            twenty thirty forty fifty sixty hundred thousand million half halves quarter third
            double triple twice once first second final last percent dozen single none"""),
        "time": _words("""today tomorrow tonight yesterday monday tuesday wednesday thursday friday
            saturday sunday weekend week weeks weekly month months monthly day days daily hour hours
            minute minutes year end deadline midnight noon morning afternoon evening night
            january february march april june july august september october november december
            until till before after within later time immediately asap date yet over"""),
        "money": _words("""amount amounts balance sum total price cost costs fee fees charge charges
            charged money funds euro euros eur dollar dollars usd pound pounds cash credit credited
            debit refund refunded owe owed owing debt interest penalty surcharge less"""),
        "payment_state": _words("""paid settled received receipt cleared processed duplicate nothing
            already cancelled canceled void voided covered complete completed closed fully full
            partial partially part zero nothing"""),
        "correction": _words("""ignore disregard mistake mistaken error wrong incorrect incorrectly
            corrected correction revised adjusted updated changed change changes new moved instead
            only"""),
        "destination": _words("""bank account iban swift bic card portal website site web link
            url dot com net org www http https click visit login log app phone telephone call ring
            text sms whatsapp telegram signal contact touch department team office address handle
            scan qr online page form desk line number mobile"""),
        "threat": _words("""suspend suspended suspension legal lawyer lawyers solicitor court
            collections collection agency action actions consequences consequence otherwise else
            penalty terminate termination cut block blocked report steps measures proceedings"""),
        "promise": _words("""discount discounts extension extend reduction reduce reduced waive waived
            free offer offering plan instalment instalments installment defer postpone forgive
            forgiven bonus gift guarantee promise whenever"""),
        "third_party": _words("""agent partner partners colleague colleagues manager accountant
            they them their theirs he she him her his someone somebody anyone person people
            representative advisor provider"""),
        "negation": _words("""not no never don't won't isn't aren't doesn't didn't can't cannot nor
            neither without"""),
    },
    "es": {
        "number": _words("""cero uno dos tres cuatro cinco seis siete ocho nueve diez once doce veinte
            treinta cuarenta cincuenta cien ciento mil millón mitad medio media doble triple
            primer primero primera segundo segunda tercero último última final porcentaje"""),
        "time": _words("""hoy mañana anoche ayer lunes martes miércoles jueves viernes sábado domingo
            semana semanas mes meses día días hora horas minutos año fin plazo medianoche tarde
            noche enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre
            diciembre hasta después luego inmediatamente fecha tiempo"""),
        "money": _words("""importe importes saldo suma total precio coste costo cargo cargos dinero
            fondos euro euros dólar dólares efectivo crédito débito reembolso abono deuda debe
            adeuda intereses recargo menos"""),
        "payment_state": _words("""pagada pagado saldada saldado liquidada liquidado recibido recibida
            cobrado cobrada duplicado duplicada nada ya anulada anulado cubierta completo completa
            parcial parte"""),
        "correction": _words("""ignore ignorar ignórela error equivocada equivocado incorrecta incorrecto
            corregida corregido modificada modificado actualizado actualizada cambiado cambiada
            cambio nueva nuevo nuevos solo sólo únicamente"""),
        "destination": _words("""banco cuenta iban swift tarjeta portal web sitio enlace punto com
            www http https pinche clic visite acceda llame llamar teléfono móvil whatsapp
            telegram contacte contacto contactar departamento equipo oficina dirección formulario
            página número línea"""),
        "threat": _words("""suspender suspenderemos suspensión legal legales abogado abogados tribunal
            judicial judiciales cobro agencia acciones consecuencias contrario penalización
            cortar bloquear medidas procedimiento"""),
        "promise": _words("""descuento descuentos prórroga ampliación reducción reducir condonar
            gratis gratuito oferta ofrecemos plan plazos aplazar aplazamiento cancelar perdonar
            regalo garantía prometemos"""),
        "third_party": _words("""agente socio socios colega gestor contable gestoría ellos ellas él
            alguien persona representante asesor proveedor"""),
        "negation": _words("""no nunca ni jamás tampoco ningún ninguna sin"""),
    },
}
